package convert

import (
	"encoding/json"
	"fmt"

	"google.golang.org/protobuf/types/known/structpb"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
)

// The pod's scheduling fields: nodeSelector, tolerations and required
// node affinity are checked by podsyncd's admission against its node;
// preferred node affinity, pod (anti-)affinity and topology spread
// constraints only score or need other nodes, so they are carried (the
// last three as their JSON objects) and have no effect.

func tolerationToProto(t corev1.Toleration) *podsyncv1.Toleration {
	return &podsyncv1.Toleration{
		Key:               t.Key,
		Operator:          string(t.Operator),
		Value:             t.Value,
		Effect:            string(t.Effect),
		TolerationSeconds: t.TolerationSeconds,
	}
}

func tolerationFromProto(t *podsyncv1.Toleration) corev1.Toleration {
	return corev1.Toleration{
		Key:               t.GetKey(),
		Operator:          corev1.TolerationOperator(t.GetOperator()),
		Value:             t.GetValue(),
		Effect:            corev1.TaintEffect(t.GetEffect()),
		TolerationSeconds: t.TolerationSeconds,
	}
}

func affinityToProto(in *corev1.Affinity) *podsyncv1.Affinity {
	if in == nil {
		return nil
	}
	out := &podsyncv1.Affinity{}
	if na := in.NodeAffinity; na != nil {
		out.NodeAffinity = &podsyncv1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: nodeSelectorToProto(na.RequiredDuringSchedulingIgnoredDuringExecution),
			PreferredDuringSchedulingIgnoredDuringExecution: toSlice(na.PreferredDuringSchedulingIgnoredDuringExecution,
				func(p corev1.PreferredSchedulingTerm) *podsyncv1.PreferredSchedulingTerm {
					return &podsyncv1.PreferredSchedulingTerm{Weight: p.Weight, Preference: nodeSelectorTermToProto(p.Preference)}
				}),
		}
	}
	if in.PodAffinity != nil {
		out.PodAffinity = jsonToStruct(in.PodAffinity)
	}
	if in.PodAntiAffinity != nil {
		out.PodAntiAffinity = jsonToStruct(in.PodAntiAffinity)
	}
	return out
}

func nodeSelectorToProto(in *corev1.NodeSelector) *podsyncv1.NodeSelector {
	if in == nil {
		return nil
	}
	return &podsyncv1.NodeSelector{NodeSelectorTerms: toSlice(in.NodeSelectorTerms, nodeSelectorTermToProto)}
}

func nodeSelectorTermToProto(t corev1.NodeSelectorTerm) *podsyncv1.NodeSelectorTerm {
	return &podsyncv1.NodeSelectorTerm{
		MatchExpressions: toSlice(t.MatchExpressions, nodeSelectorRequirementToProto),
		MatchFields:      toSlice(t.MatchFields, nodeSelectorRequirementToProto),
	}
}

func nodeSelectorRequirementToProto(r corev1.NodeSelectorRequirement) *podsyncv1.NodeSelectorRequirement {
	return &podsyncv1.NodeSelectorRequirement{Key: r.Key, Operator: string(r.Operator), Values: r.Values}
}

func (c *fromProto) affinity(path *field.Path, in *podsyncv1.Affinity) *corev1.Affinity {
	if in == nil {
		return nil
	}
	out := &corev1.Affinity{}
	if na := in.NodeAffinity; na != nil {
		out.NodeAffinity = &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: nodeSelectorFromProto(na.RequiredDuringSchedulingIgnoredDuringExecution),
			PreferredDuringSchedulingIgnoredDuringExecution: toSlice(na.PreferredDuringSchedulingIgnoredDuringExecution,
				func(p *podsyncv1.PreferredSchedulingTerm) corev1.PreferredSchedulingTerm {
					return corev1.PreferredSchedulingTerm{Weight: p.GetWeight(), Preference: nodeSelectorTermFromProto(p.GetPreference())}
				}),
		}
	}
	if in.PodAffinity != nil {
		out.PodAffinity = &corev1.PodAffinity{}
		c.structInto(path.Child("podAffinity"), in.PodAffinity, out.PodAffinity)
	}
	if in.PodAntiAffinity != nil {
		out.PodAntiAffinity = &corev1.PodAntiAffinity{}
		c.structInto(path.Child("podAntiAffinity"), in.PodAntiAffinity, out.PodAntiAffinity)
	}
	return out
}

func (c *fromProto) topologySpreadConstraints(path *field.Path, in []*structpb.Struct) []corev1.TopologySpreadConstraint {
	if in == nil {
		return nil
	}
	out := make([]corev1.TopologySpreadConstraint, len(in))
	for i, s := range in {
		c.structInto(path.Index(i), s, &out[i])
	}
	return out
}

func nodeSelectorFromProto(in *podsyncv1.NodeSelector) *corev1.NodeSelector {
	if in == nil {
		return nil
	}
	return &corev1.NodeSelector{NodeSelectorTerms: toSlice(in.NodeSelectorTerms, nodeSelectorTermFromProto)}
}

func nodeSelectorTermFromProto(t *podsyncv1.NodeSelectorTerm) corev1.NodeSelectorTerm {
	return corev1.NodeSelectorTerm{
		MatchExpressions: toSlice(t.GetMatchExpressions(), nodeSelectorRequirementFromProto),
		MatchFields:      toSlice(t.GetMatchFields(), nodeSelectorRequirementFromProto),
	}
}

func nodeSelectorRequirementFromProto(r *podsyncv1.NodeSelectorRequirement) corev1.NodeSelectorRequirement {
	return corev1.NodeSelectorRequirement{Key: r.GetKey(), Operator: corev1.NodeSelectorOperator(r.GetOperator()), Values: r.GetValues()}
}

// jsonToStruct carries a core/v1 value as its JSON object. A value that
// cannot be carried gives nil, which PodToProto then reports as a field
// podsync does not support.
func jsonToStruct(v any) *structpb.Struct {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil
	}
	s, err := structpb.NewStruct(m)
	if err != nil {
		return nil
	}
	return s
}

// structInto decodes a JSON object carried in the API strictly into v, as
// a manifest's would be.
func (c *fromProto) structInto(path *field.Path, s *structpb.Struct, v any) {
	raw, err := s.MarshalJSON()
	if err == nil {
		err = unmarshalStrict(raw, v)
	}
	if err != nil {
		c.errs = append(c.errs, field.Invalid(path, s.AsMap(), err.Error()))
	}
}

// schedulingNotices say which of the pod's scheduling fields have no
// effect on one node: they only score nodes or need other nodes.
func schedulingNotices(kind, name string, spec *corev1.PodSpec) []string {
	var fields []string
	if a := spec.Affinity; a != nil {
		if a.NodeAffinity != nil && len(a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution) > 0 {
			fields = append(fields, "spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution")
		}
		if a.PodAffinity != nil {
			fields = append(fields, "spec.affinity.podAffinity")
		}
		if a.PodAntiAffinity != nil {
			fields = append(fields, "spec.affinity.podAntiAffinity")
		}
	}
	if len(spec.TopologySpreadConstraints) > 0 {
		fields = append(fields, "spec.topologySpreadConstraints")
	}
	out := make([]string, 0, len(fields))
	for _, f := range fields {
		out = append(out, fmt.Sprintf("%s %q: %s: accepted, no effect: podsync runs on one node and has no scheduler", kind, name, f))
	}
	return out
}
