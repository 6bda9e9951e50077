// Package claims keeps the node's named volumes: the node-local
// directories the persistentVolumeClaim volumes of its pods mount, one per
// namespace and claimName (<root>/claims/<namespace>/<claimName>), as a
// PersistentVolumeClaim is its namespace's — podman kube play's named
// volumes, namespaced. A pod's first pass creates its claims
// (syncer.EnsureClaimVolume); Volumes lists them with the stored pods
// that name each, creates and deletes them on request (a volume a stored
// pod names is never deleted), fenced by the caller's lease condition,
// and, when the node starts, moves the volumes of the layout without
// namespaces to their namespace (Migrate).
package claims
