package convert

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// Manifests holds the objects of a manifest stream, each kind in the order
// it appeared. Items of a List take the List's place in that order.
type Manifests struct {
	Pods       []*corev1.Pod
	ConfigMaps []*corev1.ConfigMap
	Secrets    []*corev1.Secret
	// Claims are the PersistentVolumeClaim documents: the node-local
	// named volumes to create (podsyncctl creates them before it sends the
	// pods), in the order read, each once.
	Claims []ClaimRef
	// Notices say what Decode did that the reader should know of, such as
	// a Service it skipped.
	Notices []string
}

// DocumentError reports a document of a manifest stream that Decode could
// not accept. Err says why; it may join several strict-decoding errors.
type DocumentError struct {
	// Index is the position of the document in the stream, from 0,
	// counting only documents that are not empty.
	Index int
	// Item is the position of the object within a List document, from 0,
	// or -1 if the document is not a List or the List itself is at fault.
	Item int
	// Kind and Name identify the object at fault, when they could be read.
	Kind string
	Name string
	// Err is the underlying error.
	Err error
}

// Error returns, for example,
// `document 1 (Pod "web"): unknown field "spec.containers[0].imagePullPolicyy"`.
func (e *DocumentError) Error() string {
	var b strings.Builder
	b.WriteString("document ")
	b.WriteString(strconv.Itoa(e.Index))
	if e.Item >= 0 {
		b.WriteString(" (List) item ")
		b.WriteString(strconv.Itoa(e.Item))
	}
	if e.Kind != "" {
		b.WriteString(" (")
		b.WriteString(e.Kind)
		if e.Name != "" {
			b.WriteString(" ")
			b.WriteString(strconv.Quote(e.Name))
		}
		b.WriteString(")")
	}
	b.WriteString(": ")
	b.WriteString(e.Err.Error())
	return b.String()
}

// Unwrap returns Err.
func (e *DocumentError) Unwrap() error { return e.Err }

// Kinds Decode accepts, all in apiVersion v1.
const (
	manifestKindPod       = "Pod"
	manifestKindConfigMap = "ConfigMap"
	manifestKindSecret    = "Secret"
	manifestKindList      = "List"
)

// Decode reads a stream of Kubernetes manifests: YAML documents separated by
// "---" lines, or a stream of JSON objects. Each document is a v1 Pod,
// ConfigMap or Secret, a workload whose pod template runs as pods (see
// workloads.go: Deployment, ReplicaSet, StatefulSet, DaemonSet,
// ReplicationController, Job), or a v1 List of them; empty documents are
// skipped, and so, with a notice, are the kinds beside workloads that mean
// nothing on one node (Service, ServiceAccount, RBAC, Namespace,
// PersistentVolumeClaim).
// Documents are decoded strictly, as the API server does with strict field
// validation: field names are case-sensitive and an unknown or duplicated
// field is an error. Every error but a failure to read r is a
// *DocumentError naming the document, the object when it could be read and,
// for a strictness error, the field path.
//
// Decode does not apply Default, DefaultConfigMap or DefaultSecret, and it
// does not validate beyond the above; callers do both.
func Decode(r io.Reader) (*Manifests, error) {
	docs, err := splitDocuments(r)
	if err != nil {
		return nil, err
	}
	m := &Manifests{}
	for i, doc := range docs {
		if err := m.addDocument(i, doc); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// splitDocuments reads r and returns its non-empty documents as JSON. Input
// whose first non-space character is "{" is read as a JSON stream, anything
// else as YAML, as kubectl does.
func splitDocuments(r io.Reader) ([]json.RawMessage, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("read manifests: %w", err)
	}
	if utilyaml.IsJSONBuffer(data) {
		return splitJSON(data)
	}
	return splitYAML(data)
}

func splitJSON(data []byte) ([]json.RawMessage, error) {
	var docs []json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(data))
	for {
		var doc json.RawMessage
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, &DocumentError{Index: len(docs), Item: -1, Err: fmt.Errorf("read json: %w", err)}
		}
		if !isEmptyDocument(doc) {
			docs = append(docs, doc)
		}
	}
}

func splitYAML(data []byte) ([]json.RawMessage, error) {
	var docs []json.RawMessage
	rd := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		doc, err := rd.Read()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, &DocumentError{Index: len(docs), Item: -1, Err: fmt.Errorf("read yaml: %w", err)}
		}
		// YAMLToJSONStrict also rejects duplicate keys, which the JSON
		// decoder would no longer see.
		j, err := yaml.YAMLToJSONStrict(doc)
		if err != nil {
			return nil, &DocumentError{Index: len(docs), Item: -1, Err: fmt.Errorf("convert yaml to json: %w", err)}
		}
		if !isEmptyDocument(j) {
			docs = append(docs, j)
		}
	}
}

// isEmptyDocument reports whether a JSON document is empty: nothing, or
// null, which is what a YAML document of only comments converts to.
func isEmptyDocument(doc []byte) bool {
	doc = bytes.TrimSpace(doc)
	return len(doc) == 0 || bytes.Equal(doc, []byte("null"))
}

// manifestHeader is what Decode reads of a document before it knows the kind.
type manifestHeader struct {
	APIVersion string
	Kind       string
	Name       string
	// Namespace is metadata.namespace, empty when not set.
	Namespace string
}

// ClaimRef names a PersistentVolumeClaim document: a named volume of the
// pods of its namespace.
type ClaimRef struct {
	// Namespace is the claim's, "default" when the document sets none.
	Namespace string
	// Name is the claimName pods of the namespace mount it by.
	Name string
}

func (m *Manifests) addDocument(index int, doc json.RawMessage) error {
	h, err := readManifestHeader(doc)
	if err != nil {
		return &DocumentError{Index: index, Item: -1, Kind: h.Kind, Name: h.Name, Err: err}
	}
	if h.Kind != manifestKindList {
		if err := m.addObject(h, doc); err != nil {
			return &DocumentError{Index: index, Item: -1, Kind: h.Kind, Name: h.Name, Err: err}
		}
		return nil
	}
	var list corev1.List
	if err := unmarshalStrict(doc, &list); err != nil {
		return &DocumentError{Index: index, Item: -1, Kind: h.Kind, Name: h.Name, Err: err}
	}
	for i, item := range list.Items {
		ih, err := readManifestHeader(item.Raw)
		if err == nil && ih.Kind == manifestKindList {
			err = errors.New("a List cannot hold a List")
		}
		if err == nil {
			err = m.addObject(ih, item.Raw)
		}
		if err != nil {
			return &DocumentError{Index: index, Item: i, Kind: ih.Kind, Name: ih.Name, Err: err}
		}
	}
	return nil
}

// readManifestHeader reads apiVersion, kind and name, and checks that the
// apiVersion is v1 and the kind one Decode accepts. It returns what it could
// read even on error, for the error message.
func readManifestHeader(doc []byte) (manifestHeader, error) {
	var h manifestHeader
	var fields map[string]json.RawMessage
	if err := kjson.UnmarshalCaseSensitivePreserveInts(doc, &fields); err != nil {
		return h, fmt.Errorf("read object: %w", err)
	}
	// The name is only for messages: a malformed metadata is reported by
	// the strict decode.
	var meta struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	}
	if raw, ok := fields["metadata"]; ok {
		if err := json.Unmarshal(raw, &meta); err == nil {
			h.Name, h.Namespace = meta.Name, meta.Namespace
		}
	}
	var err error
	if h.Kind, err = stringField(fields, "kind"); err != nil {
		return h, err
	}
	if h.APIVersion, err = stringField(fields, "apiVersion"); err != nil {
		return h, err
	}
	// The kind first: the apiVersion wanted depends on it.
	switch {
	case h.Kind == "":
		return h, errors.New("kind is missing")
	case isOtherKind(h.Kind):
		return h, checkOtherAPIVersion(h)
	case h.Kind != manifestKindPod && h.Kind != manifestKindConfigMap && h.Kind != manifestKindSecret && h.Kind != manifestKindList:
		if k := kindSpelled(h.Kind); k != "" {
			return h, fmt.Errorf("kind %q is not supported; did you mean %s? (kinds are case-sensitive)", h.Kind, k)
		}
		return h, fmt.Errorf("kind %q is not supported, want Pod, ConfigMap, Secret, List or a workload (%s)", h.Kind, workloadKindList)
	case h.APIVersion == "":
		return h, errors.New(`apiVersion is missing, want "v1"`)
	case h.APIVersion != "v1":
		return h, fmt.Errorf(`apiVersion %q is not supported, want "v1"`, h.APIVersion)
	}
	return h, nil
}

// kindSpelled returns the kind Decode knows that kind spells in another
// case ("pod", "configmap", "deployment"), or "".
func kindSpelled(kind string) string {
	known := []string{manifestKindPod, manifestKindConfigMap, manifestKindSecret, manifestKindList, kindCronJob, kindPersistentVolumeClaim}
	for k := range workloadAPIVersions {
		known = append(known, k)
	}
	for k := range skippedKinds {
		known = append(known, k)
	}
	for _, k := range known {
		if strings.EqualFold(k, kind) {
			return k
		}
	}
	return ""
}

// stringField returns the string value of key in fields, or "" if the key
// is absent or null.
func stringField(fields map[string]json.RawMessage, key string) (string, error) {
	raw, ok := fields[key]
	if !ok || isEmptyDocument(raw) {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", fmt.Errorf("%s is not a string: %s", key, raw)
	}
	return s, nil
}

// addObject decodes a Pod, ConfigMap or Secret whose header has been read.
func (m *Manifests) addObject(h manifestHeader, doc []byte) error {
	switch h.Kind {
	case manifestKindPod:
		pod := &corev1.Pod{}
		if err := unmarshalStrict(doc, pod); err != nil {
			return err
		}
		m.Pods = append(m.Pods, pod)
		m.Notices = append(m.Notices, schedulingNotices(h.Kind, pod.Name, &pod.Spec)...)
	case manifestKindConfigMap:
		cm := &corev1.ConfigMap{}
		if err := unmarshalStrict(doc, cm); err != nil {
			return err
		}
		m.ConfigMaps = append(m.ConfigMaps, cm)
	case manifestKindSecret:
		s := &corev1.Secret{}
		if err := unmarshalStrict(doc, s); err != nil {
			return err
		}
		m.Secrets = append(m.Secrets, s)
	default:
		// readManifestHeader admits no other kind.
		return m.addOther(h, doc)
	}
	return nil
}

// unmarshalStrict decodes doc into v the way the API server does under
// strict field validation: case-sensitive names, no unknown and no duplicate
// fields. Each strictness error names the field's full path.
func unmarshalStrict(doc []byte, v any) error {
	strictErrs, err := kjson.UnmarshalStrict(doc, v)
	if err != nil {
		return fmt.Errorf("decode: %w", err)
	}
	return errors.Join(strictErrs...)
}
