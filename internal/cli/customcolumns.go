package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/printers"
	"k8s.io/client-go/util/jsonpath"
)

// customColumn is one column of -o custom-columns: its header and the
// JSONPath of its values.
type customColumn struct {
	header string
	path   *jsonpath.JSONPath
}

// customColumnsPrinter is kubectl's CustomColumnsPrinter
// (k8s.io/kubectl/pkg/cmd/get/customcolumn.go), over client-go's
// jsonpath: a header line, then a line per object, each cell the values
// of its column's path joined by ",", or <none>.
type customColumnsPrinter struct {
	columns []customColumn
}

var _ printers.ResourcePrinter = (*customColumnsPrinter)(nil)

// newCustomColumnsPrinter parses kubectl's spec, "HEADER:PATH,…" with
// relaxed paths (".metadata.name", "metadata.name", "{.metadata.name}").
func newCustomColumnsPrinter(spec string) (*customColumnsPrinter, error) {
	if spec == "" {
		return nil, fmt.Errorf("custom-columns format specified but no custom columns given")
	}
	p := &customColumnsPrinter{}
	for _, part := range strings.Split(spec, ",") {
		header, expr, ok := strings.Cut(part, ":")
		if !ok {
			return nil, fmt.Errorf("unexpected custom-columns spec: %s, expected <header>:<json-path-expr>", part)
		}
		path, err := relaxedJSONPathExpression(expr)
		if err != nil {
			return nil, err
		}
		jp, err := jsonPathOf(header, path)
		if err != nil {
			return nil, err
		}
		p.columns = append(p.columns, customColumn{header: header, path: jp})
	}
	return p, nil
}

var relaxedJSONPath = regexp.MustCompile(`^\{\.?([^{}]+)\}$|^\.?([^{}]+)$`)

// relaxedJSONPathExpression is kubectl's RelaxedJSONPathExpression.
func relaxedJSONPathExpression(expr string) (string, error) {
	if expr == "" {
		return expr, nil
	}
	m := relaxedJSONPath.FindStringSubmatch(expr)
	if m == nil {
		return "", fmt.Errorf("unexpected path string, expected a 'name1.name2' or '.name1.name2' or '{name1.name2}' or '{.name1.name2}'")
	}
	if m[1] != "" {
		return "{." + m[1] + "}", nil
	}
	return "{." + m[2] + "}", nil
}

// PrintObj prints the header and obj's row, or a row per item of a
// *corev1.List.
func (p *customColumnsPrinter) PrintObj(obj runtime.Object, w io.Writer) error {
	headers := make([]string, len(p.columns))
	for i, c := range p.columns {
		headers[i] = c.header
	}
	t := newTable(w, headers...)
	objs := []runtime.Object{obj}
	if l, ok := obj.(*corev1.List); ok {
		objs = objs[:0]
		for _, it := range l.Items {
			objs = append(objs, it.Object)
		}
	}
	for _, o := range objs {
		raw, err := json.Marshal(o)
		if err != nil {
			return fmt.Errorf("encode %T: %w", o, err)
		}
		var data any
		if err := json.Unmarshal(raw, &data); err != nil {
			return fmt.Errorf("decode %T: %w", o, err)
		}
		cells := make([]string, len(p.columns))
		for i, c := range p.columns {
			values, err := c.path.FindResults(data)
			if err != nil {
				return fmt.Errorf("column %s: %w", c.header, err)
			}
			var vs []string
			if len(values) == 0 || len(values[0]) == 0 {
				vs = append(vs, "<none>")
			}
			for _, arr := range values {
				for _, v := range arr {
					vs = append(vs, printers.EscapeTerminal(fmt.Sprint(valueOf(v))))
				}
			}
			cells[i] = strings.Join(vs, ",")
		}
		t.row(cells...)
	}
	return t.flush()
}

func valueOf(v reflect.Value) any {
	if !v.IsValid() {
		return nil
	}
	return v.Interface()
}
