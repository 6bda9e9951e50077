package convert

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	yaml "go.yaml.in/yaml/v3"

	"github.com/podsync/podsync/validation"
)

// Source is one manifest file for ReadManifests: its name, as messages
// show it ("stdin" for standard input), and its content.
type Source struct {
	Name string
	Data []byte
}

// Finding is one problem or notice of ReadManifests, about one field of
// one object. Its String is `FILE:LINE: KIND/NAME: FIELD: message`, with
// the parts that are not known left out.
type Finding struct {
	// File is the Source's name; Line the line of the field in it, from
	// 1, or 0 when not known (a JSON stream, or an object not read from a
	// file).
	File string
	Line int
	// Kind and Name identify the object, when they could be read.
	Kind, Name string
	// Field is the field's path within the object
	// ("spec.containers[0].image"), or "" for the whole object.
	Field string
	// Message says what is wrong, or what was done, and what to do.
	Message string
}

func (f Finding) String() string {
	var b strings.Builder
	if f.File != "" {
		b.WriteString(f.File)
		if f.Line > 0 {
			b.WriteString(":" + strconv.Itoa(f.Line))
		}
		b.WriteString(": ")
	}
	if f.Kind != "" {
		b.WriteString(f.Kind)
		if f.Name != "" {
			b.WriteString("/" + f.Name)
		}
		b.WriteString(": ")
	}
	if f.Field != "" {
		b.WriteString(f.Field + ": ")
	}
	b.WriteString(f.Message)
	return b.String()
}

// ManifestsError lists every problem ReadManifests or ValidateManifests
// found, one line each.
type ManifestsError struct {
	Problems []Finding
	// causes are the conversion errors among the problems
	// (*InvalidError), for errors.As.
	causes []error
}

func (e *ManifestsError) Error() string {
	var b strings.Builder
	if len(e.Problems) == 1 {
		b.WriteString("the manifests have 1 problem:")
	} else {
		fmt.Fprintf(&b, "the manifests have %d problems:", len(e.Problems))
	}
	for _, p := range e.Problems {
		b.WriteString("\n" + p.String())
	}
	return b.String()
}

// Unwrap returns the *InvalidError of each object podsync cannot convert.
func (e *ManifestsError) Unwrap() []error { return e.causes }

// ReadOptions tune ReadManifests.
type ReadOptions struct {
	// Validation are the options of package validation's checks, as
	// podsyncd runs them; Objects is ignored (the manifests' own
	// ConfigMaps and Secrets are used).
	Validation validation.Options
	// DecodeOnly skips the checks of package validation and the
	// conversion (for a delete, which needs only names).
	DecodeOnly bool
}

// origin is where an object was read: its document's nodes and the path
// of the object in it ("" or "items[2]").
type origin struct {
	file   string
	doc    *yamlDocument
	prefix string
	// skip are the paths (keysAsFields' syntax) of the fields the type
	// check reported and removed: validation's findings at or under them
	// are left out.
	skip []string
}

// skips reports whether a finding at path is about a field the type check
// reported already.
func (o origin) skips(path string) bool {
	path = keysAsFields(path)
	for _, s := range o.skip {
		if path == s || strings.HasPrefix(path, s+".") || strings.HasPrefix(path, s+"[") {
			return true
		}
	}
	return false
}

func (o origin) finding(kind, name, path, msg string) Finding {
	full := path
	if o.prefix != "" {
		full = joinPath(o.prefix, path)
		if path == "" {
			full = o.prefix
		}
	}
	return Finding{File: o.file, Line: o.doc.line(full), Kind: kind, Name: name, Field: path, Message: msg}
}

// readState is ReadManifests' work: the objects read, where each came
// from, and what was found.
type readState struct {
	m                           Manifests
	podFrom, cmFrom, secretFrom []origin
	problems, notices           []Finding
	causes                      []error
}

// ReadManifests reads every source as Decode reads a stream, and checks
// every document of every source before it returns, so that one bad
// document does not hide the next: fields are checked against their types
// (an unknown field suggests the nearest known one; a value of the wrong
// type says what was wanted), fields only the API server sets are dropped
// (DropServerFields) and the identity fields podsync accepts but does not
// act on are dropped too (DropIdentityFields), each with a notice; then
// the objects are defaulted (Default, DefaultConfigMap, DefaultSecret) and
// checked as podsyncd checks a request's objects (ValidateManifests).
//
// It returns the defaulted manifests and the notices, or a
// *ManifestsError listing every problem, each with its file and line.
func ReadManifests(sources []Source, opts ReadOptions) (*Manifests, []Finding, error) {
	st := &readState{}
	for _, src := range sources {
		st.readSource(src)
	}
	// The objects that decoded are checked even when others did not, so
	// that a bad file does not hide the problems of the next.
	if !opts.DecodeOnly {
		st.validate(opts.Validation)
	}
	order := make(map[string]int, len(sources))
	for i, src := range sources {
		if _, ok := order[src.Name]; !ok {
			order[src.Name] = i
		}
	}
	slices.SortStableFunc(st.problems, func(a, b Finding) int {
		return cmp.Or(cmp.Compare(order[a.File], order[b.File]), cmp.Compare(a.Line, b.Line))
	})
	// Secrets are defaulted after their check, as podsyncd does, so that
	// a problem names the field it was given in.
	for _, s := range st.m.Secrets {
		DefaultSecret(s)
	}
	if len(st.problems) > 0 {
		return nil, st.notices, &ManifestsError{Problems: st.problems, causes: st.causes}
	}
	return &st.m, st.notices, nil
}

var yamlLineError = regexp.MustCompile(`(?s)\bline (\d+): (.*)$`)

func (st *readState) readSource(src Source) {
	jdocs, err := splitDocuments(bytes.NewReader(src.Data))
	ydocs, yerr := parseYAMLDocuments(src.Data)
	if err != nil {
		f := Finding{File: src.Name, Message: err.Error()}
		var de *DocumentError
		if errors.As(err, &de) {
			f.Message = de.Err.Error()
		}
		if yerr != nil && !utilyaml.IsJSONBuffer(src.Data) {
			f.Message = yerr.Error()
		}
		// Both YAML parsers name the line in their own words.
		if m := yamlLineError.FindStringSubmatch(f.Message); m != nil {
			f.Line, _ = strconv.Atoi(m[1])
			f.Message = m[2]
		}
		st.problems = append(st.problems, f)
		return
	}
	if len(ydocs) != len(jdocs) {
		ydocs = nil // lines are not known
	}
	for i, doc := range jdocs {
		o := origin{file: src.Name}
		if ydocs != nil {
			o.doc = ydocs[i]
		} else if d, err := parseYAMLDocuments(doc); err == nil && len(d) == 1 {
			// The document alone (JSON is YAML) still gives the
			// fields' types and paths, but not their lines in the file.
			o.doc = d[0]
			o.doc.noLines = true
		}
		st.readDocument(o, doc)
	}
}

func (st *readState) readDocument(o origin, doc []byte) {
	h, err := readManifestHeader(doc)
	if err != nil {
		st.problems = append(st.problems, o.headerFinding(h, err))
		return
	}
	if h.Kind != manifestKindList {
		st.readObject(o, h, doc)
		return
	}
	var list corev1.List
	if err := unmarshalStrict(doc, &list); err != nil {
		st.problems = append(st.problems, o.finding(h.Kind, h.Name, "", err.Error()))
		return
	}
	for i, item := range list.Items {
		io := o
		io.prefix = "items[" + strconv.Itoa(i) + "]"
		ih, err := readManifestHeader(item.Raw)
		if err == nil && ih.Kind == manifestKindList {
			err = errors.New("a List cannot hold a List")
		}
		if err != nil {
			st.problems = append(st.problems, io.headerFinding(ih, err))
			continue
		}
		st.readObject(io, ih, item.Raw)
	}
}

// headerFinding reports a header error at the line of its field; the
// message names the field already.
func (o origin) headerFinding(h manifestHeader, err error) Finding {
	f := o.finding(h.Kind, h.Name, headerField(err), err.Error())
	f.Field = ""
	return f
}

// headerField is the field a header error is about.
func headerField(err error) string {
	switch msg := err.Error(); {
	case strings.HasPrefix(msg, "apiVersion"):
		return "apiVersion"
	case strings.HasPrefix(msg, "kind"):
		return "kind"
	}
	return ""
}

// readOther reads a kind isOtherKind accepts: a workload's pods, each from
// the workload's document; a skipped kind's notice; a CronJob's refusal.
func (st *readState) readOther(o origin, h manifestHeader, doc []byte) {
	var m Manifests
	if err := m.addOther(h, doc); err != nil {
		st.problems = append(st.problems, o.finding(h.Kind, h.Name, "", err.Error()))
		return
	}
	for _, n := range m.Notices {
		// The finding names the object already.
		n = strings.TrimPrefix(strings.TrimPrefix(n, fmt.Sprintf("%s %q: ", h.Kind, h.Name)), fmt.Sprintf("%s %q ", h.Kind, h.Name))
		st.notices = append(st.notices, o.finding(h.Kind, h.Name, "", n))
	}
	for _, pod := range m.Pods {
		st.acceptPod(o, h, pod)
	}
	for _, c := range m.Claims {
		if !slices.Contains(st.m.Claims, c) {
			st.m.Claims = append(st.m.Claims, c)
		}
	}
}

// acceptPod drops from a decoded pod (of a Pod document, or a workload's
// template) what the API server fills in and what podsync accepts without
// acting on, each with a notice at o, defaults it and adds it.
func (st *readState) acceptPod(o origin, h manifestHeader, v *corev1.Pod) {
	if dropped := DropServerFields(v); len(dropped) > 0 {
		st.notices = append(st.notices, o.finding(h.Kind, h.Name, "", "dropped what the API server fills in: "+strings.Join(dropped, ", ")))
	}
	if ignored := DropIdentityFields(v); len(ignored) > 0 {
		st.notices = append(st.notices, o.finding(h.Kind, h.Name, "", "accepted "+strings.Join(ignored, ", ")+
			", but no service account token is mounted: podsync has no API server to issue one"))
	}
	Default(v)
	st.m.Pods = append(st.m.Pods, v)
	st.podFrom = append(st.podFrom, o)
}

// readObject type-checks and decodes one Pod, ConfigMap or Secret, or
// hands a workload or another kind to readOther.
func (st *readState) readObject(o origin, h manifestHeader, doc []byte) {
	if isOtherKind(h.Kind) {
		st.readOther(o, h, doc)
		return
	}
	var obj any
	switch h.Kind {
	case manifestKindPod:
		obj = &corev1.Pod{}
	case manifestKindConfigMap:
		obj = &corev1.ConfigMap{}
	case manifestKindSecret:
		obj = &corev1.Secret{}
	}
	if node := o.node(); node != nil {
		var probs []fieldProblem
		checkTypes(node, reflect.TypeOf(obj), "", nil, &probs)
		for _, p := range probs {
			if o.doc.noLines {
				p.line = 0
			}
			st.problems = append(st.problems, Finding{File: o.file, Line: p.line, Kind: h.Kind, Name: h.Name, Field: p.path, Message: p.msg})
		}
		if len(probs) > 0 {
			// One round: the object without its bad fields is decoded and
			// checked too, so that the problems only validation finds
			// (restartPolicy: Sometimes) show up with these, not after
			// they are fixed. What validation would say about a removed
			// field (now missing) is left out: its problem is reported.
			repaired, err := withoutFields(doc, probs)
			if err != nil {
				return
			}
			doc = repaired
			for _, p := range probs {
				o.skip = append(o.skip, p.path)
				if p.meant != "" {
					o.skip = append(o.skip, p.meant)
				}
			}
		}
	}
	if err := unmarshalStrict(doc, obj); err != nil {
		// What the node walk let through (a JSON stream has no nodes):
		// in a manifest's words where the decoder gives them.
		f := o.finding(h.Kind, h.Name, "", err.Error())
		var ute *json.UnmarshalTypeError
		if errors.As(err, &ute) {
			f = o.finding(h.Kind, h.Name, ute.Field, fmt.Sprintf("want %s, got a %s", kindWord(ute.Type), ute.Value))
		}
		if len(o.skip) == 0 {
			st.problems = append(st.problems, f)
		}
		return
	}
	switch v := obj.(type) {
	case *corev1.Pod:
		for _, n := range schedulingNotices(h.Kind, v.Name, &v.Spec) {
			st.notices = append(st.notices, o.finding(h.Kind, h.Name, "", strings.TrimPrefix(n, fmt.Sprintf("%s %q: ", h.Kind, v.Name))))
		}
		st.acceptPod(o, h, v)
	case *corev1.ConfigMap:
		DefaultConfigMap(v)
		st.m.ConfigMaps = append(st.m.ConfigMaps, v)
		st.cmFrom = append(st.cmFrom, o)
	case *corev1.Secret:
		st.m.Secrets = append(st.m.Secrets, v)
		st.secretFrom = append(st.secretFrom, o)
	}
}

// withoutFields returns doc, an object's JSON, without the fields of
// probs.
func withoutFields(doc []byte, probs []fieldProblem) ([]byte, error) {
	var v any
	if err := json.Unmarshal(doc, &v); err != nil {
		return nil, err
	}
	for _, p := range probs {
		v = removeAt(v, p.at)
	}
	return json.Marshal(v)
}

// removeAt removes the value at path from v, a decoded JSON value; an
// item removed from a list becomes null, so that later indexes still name
// their items. A path v does not have is ignored.
func removeAt(v any, path []any) any {
	if len(path) == 0 {
		return nil
	}
	switch t := v.(type) {
	case map[string]any:
		k, ok := path[0].(string)
		if !ok {
			break
		}
		if len(path) == 1 {
			delete(t, k)
		} else if c, ok := t[k]; ok {
			t[k] = removeAt(c, path[1:])
		}
	case []any:
		i, ok := path[0].(int)
		if !ok || i >= len(t) {
			break
		}
		t[i] = removeAt(t[i], path[1:])
	}
	return v
}

// node returns the YAML node of the object o names, or nil.
func (o origin) node() *yaml.Node {
	if o.doc == nil {
		return nil
	}
	n := o.doc.root
	if o.prefix != "" {
		n = childNode(n, "items")
		i, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(o.prefix, "items["), "]"))
		n = resolveAlias(n)
		if n == nil || i >= len(n.Content) {
			return nil
		}
		n = n.Content[i]
	}
	return n
}

// validate runs ValidateManifests and places its findings.
func (st *readState) validate(opts validation.Options) {
	for _, e := range validateManifests(&st.m, opts) {
		var o origin
		switch e.kind {
		case manifestKindPod:
			o = st.podFrom[e.index]
		case manifestKindConfigMap:
			o = st.cmFrom[e.index]
		case manifestKindSecret:
			o = st.secretFrom[e.index]
		}
		if o.skips(e.err.Field) {
			continue
		}
		st.problems = append(st.problems, o.finding(e.kind, e.name, e.err.Field, Describe(e.err)))
		if e.cause != nil {
			st.causes = append(st.causes, e.cause)
		}
	}
}
