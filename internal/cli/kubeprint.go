package cli

import (
	"fmt"
	"io"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/printers"
	"k8s.io/client-go/util/jsonpath"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/convert"
)

// The kubectl output formats of -o that print Kubernetes objects, and the
// API's messages.
const (
	formatName          = "name"          // TYPE/NAME, one a line
	formatJSONPath      = "jsonpath"      // -o jsonpath=TEMPLATE
	formatJSONPathFile  = "jsonpath-file" // -o jsonpath-file=FILE
	formatCustomColumns = "custom-columns"
	formatProtoJSON     = "proto-json" // the API's messages as protojson
	formatProtoYAML     = "proto-yaml" // the same, as YAML
)

// kubeFormats are the -o values of the commands that print Kubernetes
// objects, as kubectl documents them (kubectl get --help), with
// podsync's proto-json and proto-yaml; "=…" takes an argument.
var kubeFormats = []string{formatWide, formatJSON, formatYAML, formatName, formatJSONPath + "=…", formatJSONPathFile + "=…",
	formatCustomColumns + "=…", formatProtoJSON, formatProtoYAML}

// kubePrinter prints Kubernetes objects in one -o format with
// cli-runtime's printers (json, yaml, name, jsonpath) or kubectl's
// custom-columns (customcolumns.go).
type kubePrinter struct {
	p printers.ResourcePrinter
}

// splitFormat splits "-o jsonpath=TEMPLATE" into its format and argument.
func splitFormat(o string) (format, arg string) {
	format, arg, _ = strings.Cut(o, "=")
	return format, arg
}

// isKubeFormat reports whether o prints Kubernetes objects through
// newKubePrinter (everything but a table, wide and the API's messages).
func isKubeFormat(o string) bool {
	switch f, _ := splitFormat(o); f {
	case formatJSON, formatYAML, formatName, formatJSONPath, formatJSONPathFile, formatCustomColumns:
		return true
	}
	return false
}

// newKubePrinter returns the printer of -o o, or a usage error.
func newKubePrinter(o string, readFile func(string) ([]byte, error)) (*kubePrinter, error) {
	f, arg := splitFormat(o)
	switch f {
	case formatJSON:
		return &kubePrinter{p: &printers.JSONPrinter{}}, nil
	case formatYAML:
		return &kubePrinter{p: &printers.YAMLPrinter{}}, nil
	case formatName:
		return &kubePrinter{p: &printers.NamePrinter{}}, nil
	case formatJSONPath, formatJSONPathFile:
		tmpl := arg
		if f == formatJSONPathFile {
			b, err := readFile(arg)
			if err != nil {
				return nil, usageErrorf("-o %s: %v", o, err)
			}
			tmpl = string(b)
		}
		if tmpl == "" {
			return nil, usageErrorf("-o %s needs a template, such as -o jsonpath='{.metadata.name}'", f)
		}
		p, err := printers.NewJSONPathPrinter(tmpl)
		if err != nil {
			return nil, usageErrorf("-o %s: %v", o, err)
		}
		// kubectl's: a key missing in one object prints nothing.
		p.AllowMissingKeys(true)
		return &kubePrinter{p: p}, nil
	case formatCustomColumns:
		p, err := newCustomColumnsPrinter(arg)
		if err != nil {
			return nil, usageErrorf("-o %s: %v", o, err)
		}
		return &kubePrinter{p: p}, nil
	}
	return nil, usageErrorf("-o %q: want %s", o, strings.Join(kubeFormats, ", "))
}

// print prints objs: one object as it is for a single name (single), a
// kind: List of them otherwise, as kubectl get does; name and
// custom-columns print every object on its own line either way.
func (k *kubePrinter) print(w io.Writer, objs []runtime.Object, single bool) error {
	switch k.p.(type) {
	case *printers.NamePrinter:
		for _, o := range objs {
			if err := k.p.PrintObj(o, w); err != nil {
				return err
			}
		}
		return nil
	}
	if single && len(objs) == 1 {
		return k.p.PrintObj(objs[0], w)
	}
	// jsonpath reads it as JSON too (.items[*]).
	list := &corev1.List{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "List"}}
	for _, o := range objs {
		list.Items = append(list.Items, runtime.RawExtension{Object: o})
	}
	return k.p.PrintObj(list, w)
}

// kubePod is the core/v1 Pod a kubectl user expects of an API Pod: the
// spec as stored (defaulted), the status as the kubelet reports it, with
// apiVersion and kind. podsync's own status fields (the sandbox, the
// node's name) have no place in it; -o proto-json shows them.
func kubePod(p *podsyncv1.Pod) (*corev1.Pod, error) {
	pod, err := convert.PodFromProto(p)
	if err != nil {
		return nil, fmt.Errorf("convert pod %s/%s: %w", p.GetMetadata().GetNamespace(), p.GetMetadata().GetName(), err)
	}
	pod.APIVersion, pod.Kind = "v1", "Pod"
	return pod, nil
}

// kubePods converts pods with kubePod.
func kubePods(pods []*podsyncv1.Pod) ([]runtime.Object, error) {
	out := make([]runtime.Object, 0, len(pods))
	for _, p := range pods {
		pod, err := kubePod(p)
		if err != nil {
			return nil, err
		}
		out = append(out, pod)
	}
	return out, nil
}

// jsonPathOf parses a custom column's or -o jsonpath's template.
func jsonPathOf(name, tmpl string) (*jsonpath.JSONPath, error) {
	jp := jsonpath.New(name).AllowMissingKeys(true)
	if err := jp.Parse(tmpl); err != nil {
		return nil, err
	}
	return jp, nil
}
