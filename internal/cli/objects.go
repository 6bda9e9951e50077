package cli

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"strconv"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/proto"
	"k8s.io/apimachinery/pkg/runtime"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/client"
	"github.com/podsync/podsync/convert"
)

// objectKindOf is the API's kind of a stored object's resource.
func objectKindOf(r resKind) podsyncv1.ObjectKind {
	if r == resourceSecrets {
		return podsyncv1.ObjectKind_OBJECT_KIND_SECRET
	}
	return podsyncv1.ObjectKind_OBJECT_KIND_CONFIG_MAP
}

// kindWord is how kubectl names a kind in its output ("configmap/cfg").
func kindWord(k podsyncv1.ObjectKind) string {
	if k == podsyncv1.ObjectKind_OBJECT_KIND_SECRET {
		return "secret"
	}
	return "configmap"
}

// getObjects prints the stored objects of kind: the named ones of -n, or
// every one f selects; Secrets' values are never shown (podsyncd never
// returns them).
func (a *app) getObjects(ctx context.Context, c *client.Client, kind podsyncv1.ObjectKind, f getFlags, names []string) error {
	if f.fieldSelector != "" || f.showLabels {
		return usageErrorf("--field-selector and --show-labels are for pods and events")
	}
	if len(f.phases) > 0 {
		return usageErrorf("--phase selects pods, not %ss", kindWord(kind))
	}
	var objs []*podsyncv1.Object
	if len(names) == 0 {
		resp, err := c.ListObjects(ctx, &podsyncv1.ListObjectsRequest{Kind: kind, Namespace: f.namespace, LabelSelector: f.selector})
		if err != nil {
			return err
		}
		objs = resp.GetObjects()
	}
	for _, name := range names {
		obj, err := c.GetObject(ctx, kind, namespaceOr(f.namespace), name)
		if err != nil {
			return err
		}
		objs = append(objs, obj)
	}
	switch {
	case isKubeFormat(f.output):
		p, err := newKubePrinter(f.output, os.ReadFile)
		if err != nil {
			return err
		}
		out := make([]runtime.Object, 0, len(objs))
		for _, o := range objs {
			if s := o.GetSecret(); s != nil {
				sec := convert.SecretFromProto(s)
				sec.APIVersion, sec.Kind = "v1", "Secret"
				out = append(out, sec)
				continue
			}
			cm := convert.ConfigMapFromProto(o.GetConfigMap())
			cm.APIVersion, cm.Kind = "v1", "ConfigMap"
			out = append(out, cm)
		}
		return p.print(a.stdout, out, len(names) == 1)
	case f.output == formatProtoJSON || f.output == formatProtoYAML:
		mw := &messageWriter{w: a.stdout, format: protoFormat(f.output)}
		for _, o := range objs {
			var err error
			if o.GetSecret() != nil {
				err = mw.write(o.GetSecret())
			} else {
				err = mw.write(o.GetConfigMap())
			}
			if err != nil {
				return err
			}
		}
		return nil
	case len(objs) == 0:
		return a.noResources(f.namespace)
	}
	header := []string{"NAMESPACE", "NAME", "DATA", "AGE"}
	if kind == podsyncv1.ObjectKind_OBJECT_KIND_SECRET {
		header = []string{"NAMESPACE", "NAME", "TYPE", "DATA", "AGE"}
	}
	if f.output == formatWide {
		header = append(header, "RESOURCE-VERSION")
	}
	t := newTable(a.stdout, header...)
	for _, o := range objs {
		var row []string
		var meta *podsyncv1.ObjectMeta
		if s := o.GetSecret(); s != nil {
			meta = s.GetMetadata()
			row = []string{meta.GetNamespace(), meta.GetName(), s.GetType(), strconv.Itoa(len(s.GetData()))}
		} else {
			cm := o.GetConfigMap()
			meta = cm.GetMetadata()
			row = []string{meta.GetNamespace(), meta.GetName(), strconv.Itoa(len(cm.GetData()) + len(cm.GetBinaryData()))}
		}
		row = append(row, age(meta.GetCreationTimestamp().AsTime(), a.now()))
		if f.output == formatWide {
			row = append(row, meta.GetResourceVersion())
		}
		t.row(row...)
	}
	return t.flush()
}

// deleteObjects deletes the named stored objects of kind in -n.
func (a *app) deleteObjects(ctx context.Context, c *client.Client, kind podsyncv1.ObjectKind, f deleteFlags, names []string) error {
	if len(names) == 0 || len(f.files) > 0 || f.all || f.uid != "" {
		return usageErrorf("delete %s takes names only (no -f, --all or --uid)", kindWord(kind))
	}
	ctx, cancel := a.callContext(ctx)
	defer cancel()
	var errs []error
	for _, name := range names {
		resp, err := c.DeleteObject(ctx, &podsyncv1.DeleteObjectRequest{Kind: kind, Namespace: namespaceOr(f.namespace), Name: name})
		switch {
		case err != nil:
			errs = append(errs, err)
		case !resp.GetFound() && !f.ignoreNotFound:
			errs = append(errs, fmt.Errorf("%s %s/%s not found (--ignore-not-found accepts that)", kindWord(kind), namespaceOr(f.namespace), name))
		case resp.GetFound():
			if _, err := fmt.Fprintf(a.stdout, "%s/%s deleted\n", kindWord(kind), name); err != nil {
				return err
			}
		}
	}
	if len(errs) > 0 {
		return failed("%v", errors.Join(errs...))
	}
	return nil
}

func (a *app) newApplyCommand() *cobra.Command {
	var files []string
	cmd := &cobra.Command{
		Use:   "apply -f FILE...",
		Short: "Store the ConfigMaps and Secrets and apply the pods of manifests",
		Long: "apply sends every ConfigMap and Secret of the manifests to podsyncd as objects\n" +
			"of the node (one ApplyObjects call, all or none), then every pod — those of\n" +
			"the workload kinds included — with one sync pass each (SyncPod). It does not\n" +
			"wait for the pods to run; use run for that. A pod may refer to an object\n" +
			"applied earlier or later: it waits for it, as on a kubelet. A changed\n" +
			"ConfigMap or Secret updates the files of the running pods that mount it.\n\n" +
			"Each object is reported as kubectl does: created, configured or unchanged.",
		Example: "  podsyncctl apply -f config.yaml\n" +
			"  podsyncctl apply -f manifests/",
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(files) == 0 {
				return usageErrorf("apply needs -f")
			}
			m, err := a.readManifests(files, false)
			if err != nil {
				return err
			}
			var objReq *podsyncv1.ApplyObjectsRequest
			if len(m.ConfigMaps)+len(m.Secrets) > 0 {
				if objReq, err = client.ApplyObjectsRequestFromManifests(m); err != nil {
					return err
				}
			}
			var podReq *podsyncv1.RunPodsRequest
			if len(m.Pods) > 0 {
				pods := *m
				pods.ConfigMaps, pods.Secrets = nil, nil
				if podReq, err = client.RunPodsRequestFromManifests(&pods); err != nil {
					return err
				}
			}
			if objReq == nil && podReq == nil && len(m.Claims) == 0 {
				return fmt.Errorf("the manifests hold no Pod, ConfigMap, Secret or PersistentVolumeClaim")
			}
			c, err := a.client(cmd.Context())
			if err != nil {
				return err
			}
			defer func() { _ = c.Close() }()
			ctx, cancel := a.waitContext(cmd.Context())
			defer cancel()
			if err := a.createClaims(ctx, c, m.Claims, a.stdout); err != nil {
				return err
			}
			if objReq != nil {
				resp, err := c.ApplyObjects(ctx, objReq)
				if err != nil {
					return err
				}
				for _, r := range resp.GetResults() {
					word := "unchanged"
					switch {
					case r.GetCreated():
						word = "created"
					case r.GetChanged():
						word = "configured"
					}
					if _, err := fmt.Fprintf(a.stdout, "%s/%s %s\n", kindWord(r.GetObject().GetKind()), r.GetObject().GetName(), word); err != nil {
						return err
					}
				}
			}
			for _, p := range podReq.GetPods() {
				// kubectl's unchanged: the pod as stored before is the
				// one sent (a pass runs all the same).
				var before *podsyncv1.Pod
				gctx, gcancel := a.callContext(ctx)
				if resp, err := c.GetPod(gctx, namespaceOr(p.GetMetadata().GetNamespace()), p.GetMetadata().GetName()); err == nil {
					before = resp.GetPod()
				}
				gcancel()
				res, err := c.SyncPod(ctx, &podsyncv1.SyncPodRequest{Pod: p}, nil)
				if err != nil {
					return err
				}
				word := "configured"
				switch {
				case res.GetCreated():
					word = "created"
				case samePod(before, p):
					word = "unchanged"
				}
				if _, err := fmt.Fprintf(a.stdout, "pod/%s %s\n", p.GetMetadata().GetName(), word); err != nil {
					return err
				}
			}
			return nil
		},
	}
	addFileFlag(cmd, &files, "manifest file, directory or - for stdin; repeatable")
	return cmd
}

// samePod reports whether the stored pod before has the spec (but what
// podsyncd fills in), labels and annotations of the pod sent.
func samePod(before, sent *podsyncv1.Pod) bool {
	if before == nil {
		return false
	}
	spec := proto.Clone(before.GetSpec()).(*podsyncv1.PodSpec)
	if sent.GetSpec().Priority == nil {
		// podsyncd sets it from priorityClassName, as the Priority
		// admission plugin does.
		spec.Priority = nil
	}
	bm, sm := before.GetMetadata(), sent.GetMetadata()
	return proto.Equal(spec, sent.GetSpec()) && maps.Equal(bm.GetLabels(), sm.GetLabels()) &&
		maps.Equal(bm.GetAnnotations(), sm.GetAnnotations())
}
