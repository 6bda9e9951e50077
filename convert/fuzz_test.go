package convert

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"google.golang.org/protobuf/proto"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
)

// addManifestSeeds adds every manifest under the repository's testdata
// to the corpus, in YAML and as the JSON stream Decode also reads.
func addManifestSeeds(f *testing.F) {
	paths, err := filepath.Glob(filepath.Join("..", "testdata", "manifests", "*.yaml"))
	if err != nil || len(paths) == 0 {
		f.Fatalf("no seed manifests: %v", err)
	}
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a"},"spec":{"containers":[{"name":"c","image":"busybox"}]}}`))
	f.Add([]byte("apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Secret\n  metadata: {name: s}\n  stringData: {k: v}\n"))
}

// FuzzDecode runs what podsyncctl does with a manifest file — Decode,
// then Default, DefaultConfigMap and DefaultSecret, then ManifestsToProto
// — on arbitrary bytes. Nothing may panic. For every object that converts:
// defaulting is idempotent, and the conversion is a fixed point, the API
// form converting back to the same core/v1 object and to the same API
// form again.
func FuzzDecode(f *testing.F) {
	addManifestSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := Decode(bytes.NewReader(data))
		if err != nil {
			return
		}
		for _, p := range m.Pods {
			Default(p)
			again := p.DeepCopy()
			Default(again)
			if !apiequality.Semantic.DeepEqual(p, again) {
				t.Fatalf("Default is not idempotent for pod %q", p.Name)
			}
			// The check for unsupported fields trusts equal protobuf
			// encodings only where the JSON forms agree.
			if back, err := PodFromProto(podToProto(p)); err == nil && sameEncoding(p, back) {
				if errs := unsupportedJSON(p, back); len(errs) > 0 {
					t.Fatalf("pod %q: equal encodings, but the JSON forms differ: %v", p.Name, errs)
				}
			}
			out, err := PodToProto(p)
			if err != nil {
				continue // a field podsync does not support
			}
			back, err := PodFromProto(out)
			if err != nil {
				t.Fatalf("PodFromProto of PodToProto's output: %v", err)
			}
			out2, err := PodToProto(back)
			if err != nil {
				t.Fatalf("PodToProto of a converted pod: %v", err)
			}
			if !proto.Equal(out, out2) {
				t.Fatalf("pod %q: the conversion is not stable:\n%v\n%v", p.Name, out, out2)
			}
		}
		for _, c := range m.ConfigMaps {
			DefaultConfigMap(c)
			if out, err := ConfigMapToProto(c); err == nil {
				if out2, err := ConfigMapToProto(ConfigMapFromProto(out)); err != nil || !proto.Equal(out, out2) {
					t.Fatalf("ConfigMap %q: the conversion is not stable: %v", c.Name, err)
				}
			}
		}
		for _, s := range m.Secrets {
			DefaultSecret(s)
			if out, err := SecretToProto(s); err == nil {
				if out2, err := SecretToProto(SecretFromProto(out)); err != nil || !proto.Equal(out, out2) {
					t.Fatalf("Secret %q: the conversion is not stable: %v", s.Name, err)
				}
			}
		}
		_, _, _, _ = ManifestsToProto(m)
	})
}

// FuzzReadManifests runs what podsyncctl does with its -f files —
// ReadManifests over two sources — on arbitrary bytes. Nothing may panic;
// a refusal lists at least one problem, each with its file; what is
// accepted converts to the API.
func FuzzReadManifests(f *testing.F) {
	addManifestSeeds(f)
	f.Add([]byte("apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec:\n  containers: [&c {name: c, image: i, env: &e [{name: A, value: x}, {name: B, value: 1}]}]\n  initContainers: [{name: d, image: i, env: *e}, *c]\n"))
	f.Add([]byte("a: &a [x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a]\nc: &c [*b, *b, *b, *b, *b, *b, *b, *b]\nd: [*c, *c, *c, *c, *c, *c, *c, *c]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, _, err := ReadManifests([]Source{{Name: "a", Data: data}, {Name: "b", Data: data}}, ReadOptions{})
		if err != nil {
			var me *ManifestsError
			if !errors.As(err, &me) || len(me.Problems) == 0 {
				t.Fatalf("error %v: want a *ManifestsError with problems", err)
			}
			for _, p := range me.Problems {
				if p.File != "a" && p.File != "b" {
					t.Fatalf("problem without its file: %v", p)
				}
			}
			return
		}
		if _, _, _, err := ManifestsToProto(m); err != nil {
			t.Fatalf("accepted manifests do not convert: %v", err)
		}
	})
}
