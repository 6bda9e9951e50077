package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"sigs.k8s.io/yaml"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
)

// Output formats of -o.
const (
	formatText = ""     // the command's human-readable output
	formatWide = "wide" // tables with more columns (get)
	formatJSON = "json" // the API's messages as protojson
	formatYAML = "yaml" // the same, as YAML
)

// checkFormat returns a usage error unless f is one of allowed.
func checkFormat(f string, allowed ...string) error {
	for _, a := range allowed {
		if f == a {
			return nil
		}
	}
	var names []string
	for _, a := range allowed {
		if a != formatText {
			names = append(names, a)
		}
	}
	return usageErrorf("-o %q: want %s", f, strings.Join(names, ", "))
}

// marshalJSON renders msg as the API's JSON (field names as in the JSON
// mapping, such as restartPolicy), indented the same way on every run:
// protojson varies its whitespace on purpose.
func marshalJSON(msg proto.Message) ([]byte, error) {
	raw, err := protojson.Marshal(msg)
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", msg.ProtoReflect().Descriptor().Name(), err)
	}
	return indentJSON(raw)
}

func indentJSON(raw []byte) ([]byte, error) {
	var out bytes.Buffer
	if err := json.Indent(&out, raw, "", "  "); err != nil {
		return nil, fmt.Errorf("indent json: %w", err)
	}
	out.WriteByte('\n')
	return out.Bytes(), nil
}

// messageWriter writes API messages one after the other as JSON objects
// or as YAML documents separated by "---".
type messageWriter struct {
	w      io.Writer
	format string
	n      int
}

// write writes one message.
func (mw *messageWriter) write(msg proto.Message) error {
	raw, err := marshalJSON(msg)
	if err != nil {
		return err
	}
	return mw.writeJSON(raw)
}

// writeJSON writes one already encoded JSON document.
func (mw *messageWriter) writeJSON(raw []byte) error {
	out := raw
	if mw.format == formatYAML {
		y, err := yaml.JSONToYAML(raw)
		if err != nil {
			return fmt.Errorf("encode yaml: %w", err)
		}
		out = y
		if mw.n > 0 {
			out = append([]byte("---\n"), y...)
		}
	}
	mw.n++
	_, err := mw.w.Write(out)
	return err
}

// writePodList writes pods as a Kubernetes List ({"apiVersion": "v1",
// "kind": "List", "items": [...]}), which `podsyncctl convert` and kubectl
// read back.
func writePodList(w io.Writer, format string, pods []*podsyncv1.Pod) error {
	items := make([]json.RawMessage, 0, len(pods))
	for _, p := range pods {
		raw, err := protojson.Marshal(p)
		if err != nil {
			return fmt.Errorf("encode pod: %w", err)
		}
		items = append(items, raw)
	}
	raw, err := json.Marshal(struct {
		APIVersion string            `json:"apiVersion"`
		Kind       string            `json:"kind"`
		Items      []json.RawMessage `json:"items"`
	}{"v1", "List", items})
	if err != nil {
		return fmt.Errorf("encode list: %w", err)
	}
	raw, err = indentJSON(raw)
	if err != nil {
		return err
	}
	return (&messageWriter{w: w, format: format}).writeJSON(raw)
}

// table writes aligned columns as kubectl does.
type table struct {
	tw *tabwriter.Writer
}

func newTable(w io.Writer, header ...string) *table {
	t := &table{tw: tabwriter.NewWriter(w, 6, 4, 3, ' ', 0)}
	t.row(header...)
	return t
}

func (t *table) row(cells ...string) {
	for i, c := range cells {
		if i > 0 {
			_, _ = io.WriteString(t.tw, "\t")
		}
		// A tab or newline in a cell would break the columns.
		_, _ = io.WriteString(t.tw, strings.NewReplacer("\t", " ", "\n", " ").Replace(c))
	}
	_, _ = io.WriteString(t.tw, "\n")
}

func (t *table) flush() error { return t.tw.Flush() }

// orNone is s, or "<none>" when s is empty, as kubectl prints it.
func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

// shortID shortens a runtime id to 13 characters, as crictl does.
func shortID(id string) string {
	if _, after, ok := strings.Cut(id, "://"); ok {
		id = after
	}
	if len(id) > 13 {
		return id[:13]
	}
	return id
}
