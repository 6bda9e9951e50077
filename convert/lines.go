package convert

import (
	"bytes"
	"errors"
	"io"
	"strconv"
	"strings"

	yaml "go.yaml.in/yaml/v3"
)

// yamlDocument is one document of a manifest file read with the YAML node
// API, for what the JSON form has lost: the line of every field.
type yamlDocument struct {
	root  *yaml.Node
	lines map[string]int
	// noLines is set when the lines are not the file's.
	noLines bool
}

// parseYAMLDocuments reads data's non-empty documents as YAML nodes (JSON
// is YAML, so a JSON file with one object reads too). It returns nil and
// the parser's error, which names the line, when data is not YAML.
func parseYAMLDocuments(data []byte) ([]*yamlDocument, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var docs []*yamlDocument
	for {
		var n yaml.Node
		err := dec.Decode(&n)
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, err
		}
		root := &n
		if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
			root = root.Content[0]
		}
		if root.Kind == 0 || root.Kind == yaml.DocumentNode || (root.Kind == yaml.ScalarNode && root.Tag == "!!null") {
			continue // empty, as splitDocuments skips it
		}
		d := &yamlDocument{root: root, lines: map[string]int{"": root.Line}}
		recordLines(root, "", d.lines)
		docs = append(docs, d)
	}
}

// recordLines maps the path of every field under n, in field.Path's
// syntax ("spec.containers[0].env[1].value", a map key as ".key": line
// turns field.Path's "[key]" into that), to the line of its key.
func recordLines(n *yaml.Node, path string, lines map[string]int) {
	n = resolveAlias(n)
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			p := joinPath(path, k.Value)
			lines[p] = k.Line
			recordLines(v, p, lines)
		}
	case yaml.SequenceNode:
		for i, item := range n.Content {
			p := path + "[" + strconv.Itoa(i) + "]"
			lines[p] = item.Line
			recordLines(item, p, lines)
		}
	}
}

func resolveAlias(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

func joinPath(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// line returns the line of path, or of its nearest ancestor that has one.
func (d *yamlDocument) line(path string) int {
	if d == nil || d.noLines {
		return 0
	}
	path = keysAsFields(path)
	for {
		if l, ok := d.lines[path]; ok {
			return l
		}
		i := max(strings.LastIndexByte(path, '.'), strings.LastIndexByte(path, '['))
		if i <= 0 {
			return d.lines[""]
		}
		path = path[:i]
	}
}

// keysAsFields turns the map keys of a field.Path string ("data[ca.crt]")
// into fields ("data.ca.crt"), keeping list indexes ("env[0]").
func keysAsFields(path string) string {
	var b strings.Builder
	for {
		i := strings.IndexByte(path, '[')
		if i < 0 {
			b.WriteString(path)
			return b.String()
		}
		j := strings.IndexByte(path[i:], ']')
		if j < 0 {
			b.WriteString(path)
			return b.String()
		}
		key := path[i+1 : i+j]
		b.WriteString(path[:i])
		if _, err := strconv.Atoi(key); err == nil {
			b.WriteString("[" + key + "]")
		} else {
			b.WriteString("." + key)
		}
		path = path[i+j+1:]
	}
}

// childNode returns the value of key in mapping n, or nil.
func childNode(n *yaml.Node, key string) *yaml.Node {
	n = resolveAlias(n)
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}
