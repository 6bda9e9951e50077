// Package manifestdir is podsyncd's manifest directory (--manifest-dir),
// the kubelet's staticPodPath: the pods, ConfigMaps and Secrets of the
// files of a directory, kept applied as the files come, change and go
// (inotify plus a periodic rescan), owned by their file
// (engine.SourceAnnotation) so that the API cannot change or delete
// them.
package manifestdir
