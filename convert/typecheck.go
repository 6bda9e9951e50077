package convert

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	yaml "go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// fieldProblem is a field of a document that cannot be decoded into its
// type: an unknown field or a value of the wrong type.
type fieldProblem struct {
	path, msg string
	line      int
	// at is the path as keys (string) and list indexes (int), to remove
	// the field from the document's JSON form.
	at []any
	// meant is the path of the known field an unknown one is a typo of:
	// what is said about it missing follows from this problem.
	meant string
}

var (
	quantityType    = reflect.TypeFor[resource.Quantity]()
	intOrStringType = reflect.TypeFor[intstr.IntOrString]()
	timeType        = reflect.TypeFor[metav1.Time]()
	microTimeType   = reflect.TypeFor[metav1.MicroTime]()
	rawType         = reflect.TypeFor[runtime.RawExtension]()
	unmarshalerType = reflect.TypeFor[json.Unmarshaler]()
)

// checkTypes walks the YAML node n along the Go type t as encoding/json
// would decode it, and reports every field that is unknown (with the
// nearest known name when one is close) or whose value has the wrong type,
// in the words of a manifest ("want a string, got the number 8080"), not
// of Go. It reports all of them, where the decoder stops at the first.
//
// A quantity and a time are parsed too, as the decoder parses them, so that
// a bad one is reported at its field with the API server's words
// ("quantities must match the regular expression …").
func checkTypes(n *yaml.Node, t reflect.Type, path string, at []any, out *[]fieldProblem) {
	n = resolveAlias(n)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return
	}
	problem := func(line int, msg string) {
		*out = append(*out, fieldProblem{path: path, line: line, msg: msg, at: slices.Clone(at)})
	}
	bad := func(want string) {
		problem(n.Line, fmt.Sprintf("want %s, got %s", want, describeNode(n)))
	}
	switch t {
	case quantityType:
		if n.Kind != yaml.ScalarNode || (n.Tag != "!!str" && n.Tag != "!!int" && n.Tag != "!!float") {
			bad(`a quantity such as "500m" or "128Mi"`)
		} else if _, err := resource.ParseQuantity(n.Value); err != nil {
			problem(n.Line, fmt.Sprintf("%s is not valid: %s", strconv.Quote(n.Value), err.Error()))
		}
		return
	case intOrStringType:
		if n.Kind != yaml.ScalarNode || (n.Tag != "!!str" && n.Tag != "!!int") {
			bad("a port number or name")
		}
		return
	case timeType, microTimeType:
		if n.Kind != yaml.ScalarNode || (n.Tag != "!!str" && n.Tag != "!!timestamp") {
			bad(`a time such as "2026-01-02T15:04:05Z"`)
		} else if _, err := time.Parse(time.RFC3339, n.Value); err != nil && n.Tag == "!!str" && n.Value != "" {
			bad(`a time such as "2026-01-02T15:04:05Z"`)
		}
		return
	case rawType:
		return
	}
	if reflect.PointerTo(t).Implements(unmarshalerType) {
		return // a type of its own syntax: the decoder checks it
	}
	switch t.Kind() {
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			bad("an object")
			return
		}
		fields := jsonFields(t)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			p := joinPath(path, k.Value)
			ft, ok := fields[k.Value]
			if !ok {
				msg, meant := "unknown field", ""
				if s := nearest(k.Value, fields); s != "" {
					msg += "; did you mean " + s + "?"
					meant = joinPath(path, s)
				}
				*out = append(*out, fieldProblem{path: p, line: k.Line, msg: msg, at: append(slices.Clone(at), k.Value), meant: meant})
				continue
			}
			checkTypes(v, ft, p, append(at, k.Value), out)
		}
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			bad("a map")
			return
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			checkTypes(n.Content[i+1], t.Elem(), joinPath(path, n.Content[i].Value), append(at, n.Content[i].Value), out)
		}
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			if n.Kind != yaml.ScalarNode || n.Tag != "!!str" && n.Tag != "!!binary" {
				bad("a base64 string")
			}
			return
		}
		if n.Kind != yaml.SequenceNode {
			bad("a list")
			return
		}
		for i, item := range n.Content {
			checkTypes(item, t.Elem(), path+"["+strconv.Itoa(i)+"]", append(at, i), out)
		}
	case reflect.String:
		switch {
		case isYAML11Bool(n):
			problem(n.Line, fmt.Sprintf("want a string, got the boolean %s (YAML reads an unquoted %s as one); quote it", n.Value, n.Value))
		case n.Kind != yaml.ScalarNode || n.Tag != "!!str":
			bad("a string")
		}
	case reflect.Bool:
		if n.Kind != yaml.ScalarNode || (n.Tag != "!!bool" && !isYAML11Bool(n)) {
			bad("true or false")
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if n.Kind != yaml.ScalarNode || n.Tag != "!!int" {
			bad("an integer")
		}
	case reflect.Float32, reflect.Float64:
		if n.Kind != yaml.ScalarNode || (n.Tag != "!!int" && n.Tag != "!!float") {
			bad("a number")
		}
	}
}

// describeNode says what a value is, as a manifest's author sees it.
func describeNode(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "an object"
	case yaml.SequenceNode:
		return "a list"
	}
	switch n.Tag {
	case "!!int", "!!float":
		return "the number " + n.Value
	case "!!bool":
		return "the boolean " + n.Value
	case "!!str":
		return "the string " + strconv.Quote(n.Value)
	}
	return strconv.Quote(n.Value)
}

// jsonFields returns the fields of struct type t by JSON name, with the
// fields of inline and embedded structs as encoding/json sees them.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := make(map[string]reflect.Type)
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if name == "" && (f.Anonymous || strings.Contains(opts, "inline")) && ft.Kind() == reflect.Struct {
			for k, v := range jsonFields(ft) {
				out[k] = v
			}
			continue
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
	return out
}

// nearest returns the known field name closest to name: the same but for
// case, or within an edit distance of a third of its length (at least 1,
// at most 3). It returns "" when none is that close.
func nearest(name string, known map[string]reflect.Type) string {
	names := make([]string, 0, len(known))
	for k := range known {
		names = append(names, k)
	}
	sort.Strings(names)
	best, bestD := "", min(max(len(name)/3, 1), 3)+1
	for _, k := range names {
		if strings.EqualFold(k, name) {
			return k
		}
		if d := editDistance(strings.ToLower(name), strings.ToLower(k)); d < bestD {
			best, bestD = k, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance of a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// yaml11Bools are the plain scalars besides true and false that the YAML
// 1.1 parser under sigs.k8s.io/yaml reads as booleans, where the YAML 1.2
// node API sees strings.
var yaml11Bools = map[string]bool{
	"y": true, "Y": true, "yes": true, "Yes": true, "YES": true, "on": true, "On": true, "ON": true,
	"n": true, "N": true, "no": true, "No": true, "NO": true, "off": true, "Off": true, "OFF": true,
}

func isYAML11Bool(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.Style == 0 && n.Tag == "!!str" && yaml11Bools[n.Value]
}
