package server_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/convert"
	"github.com/podsync/podsync/engine/criconfig"
	"github.com/podsync/podsync/server"
	"github.com/podsync/podsync/validation"
)

// fuzzRequests are the request types FuzzValidateRequest decodes, chosen
// by the input's first byte.
var fuzzRequests = []func() proto.Message{
	func() proto.Message { return &podsyncv1.SyncPodRequest{} },
	func() proto.Message { return &podsyncv1.RunPodsRequest{} },
	func() proto.Message { return &podsyncv1.PlanPodRequest{} },
	func() proto.Message { return &podsyncv1.GetPodRequest{} },
	func() proto.Message { return &podsyncv1.ListPodsRequest{} },
	func() proto.Message { return &podsyncv1.DeletePodRequest{} },
	func() proto.Message { return &podsyncv1.WatchPodsRequest{} },
	func() proto.Message { return &podsyncv1.GetContainerLogsRequest{} },
}

// addRequestSeeds adds requests built from the repository's manifests the
// way podsyncctl builds them, in protojson and in the wire format.
func addRequestSeeds(f *testing.F) {
	paths, err := filepath.Glob(filepath.Join("..", "testdata", "manifests", "*.yaml"))
	if err != nil || len(paths) == 0 {
		f.Fatalf("no seed manifests: %v", err)
	}
	add := func(kind byte, m proto.Message) {
		j, err := protojson.Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(kind, j)
		b, err := proto.Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(kind, b)
	}
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		m, err := convert.Decode(bytes.NewReader(data))
		if err != nil {
			f.Fatalf("%s: %v", p, err)
		}
		for _, pod := range m.Pods {
			convert.Default(pod)
		}
		for _, c := range m.ConfigMaps {
			convert.DefaultConfigMap(c)
		}
		for _, s := range m.Secrets {
			convert.DefaultSecret(s)
		}
		pods, cms, secrets, err := convert.ManifestsToProto(m)
		if err != nil {
			f.Fatalf("%s: %v", p, err)
		}
		add(1, &podsyncv1.RunPodsRequest{Pods: pods, ConfigMaps: cms, Secrets: secrets})
		if len(pods) == 1 {
			add(0, &podsyncv1.SyncPodRequest{Pod: pods[0], ConfigMaps: cms, Secrets: secrets})
		}
	}
	tail, limit := int64(10), int64(100)
	add(3, &podsyncv1.GetPodRequest{Namespace: "demo", Name: "web"})
	add(4, &podsyncv1.ListPodsRequest{LabelSelector: "app in (web,db),tier!=cache", Phases: []string{"Running"}})
	add(5, &podsyncv1.DeletePodRequest{Name: "web", Uid: "0f8fad5b-d9cb-469f-a165-70867728950e"})
	add(6, &podsyncv1.WatchPodsRequest{SinceRevision: 3, LabelSelector: "app=web"})
	add(7, &podsyncv1.GetContainerLogsRequest{Name: "web", Container: "app", TailLines: &tail, LimitBytes: &limit})
}

// FuzzValidateRequest decodes arbitrary bytes as a request (protojson,
// else the wire format) and validates it. Validation never panics; a
// pod request it accepts converts for the engine (the pods, defaulted,
// pass the engine's own path checks, and their sandbox and container
// configs build) and back to the API.
func FuzzValidateRequest(f *testing.F) {
	addRequestSeeds(f)
	v := &server.Validator{}
	opts := criconfig.Options{RootDir: "/var/lib/podsync", PodLogDir: "/var/log/pods"}
	f.Fuzz(func(t *testing.T, kind byte, data []byte) {
		req := fuzzRequests[int(kind)%len(fuzzRequests)]()
		if err := protojson.Unmarshal(data, req); err != nil {
			proto.Reset(req)
			if err := proto.Unmarshal(data, req); err != nil {
				return
			}
		}
		switch r := req.(type) {
		case *podsyncv1.GetPodRequest:
			_ = v.ValidateGetPodRequest(r)
		case *podsyncv1.ListPodsRequest:
			_ = v.ValidateListPodsRequest(r)
		case *podsyncv1.DeletePodRequest:
			_ = v.ValidateDeletePodRequest(r)
		case *podsyncv1.WatchPodsRequest:
			_ = v.ValidateWatchPodsRequest(r)
		case *podsyncv1.GetContainerLogsRequest:
			_ = v.ValidateGetContainerLogsRequest(r)
		case server.PodsRequest:
			pods, cms, secrets, err := v.PodsFromRequest(r)
			if err != nil {
				return
			}
			for _, pod := range pods {
				if errs := validation.CheckPodPaths(pod); len(errs) > 0 {
					t.Fatalf("validation accepted a pod the engine refuses: %v", errs)
				}
				if _, err := convert.PodToProto(pod); err != nil {
					t.Fatalf("validation accepted a pod that does not convert back: %v", err)
				}
				if _, err := criconfig.SandboxConfig(pod, 0, opts); err != nil {
					t.Fatalf("validation accepted a pod without a sandbox config: %v", err)
				}
				for _, cs := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
					for i := range cs {
						_, err := criconfig.ContainerConfig(criconfig.ContainerConfigInput{Pod: pod, Container: &cs[i], ConfigMaps: cms, Secrets: secrets}, opts)
						// A subPathExpr's variables get their values at
						// the start (the kubelet's CreateContainerConfigError).
						if err != nil && !errors.Is(err, criconfig.ErrSubPathExprUnset) {
							t.Fatalf("validation accepted container %q without a config: %v", cs[i].Name, err)
						}
					}
				}
			}
		}
	})
}
