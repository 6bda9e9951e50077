package validation

import (
	"fmt"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The scheduling fields podsync's admission checks against the node, as
// the API server validates them (k8s.io/kubernetes pkg/apis/core/validation
// validateTolerations, ValidateNodeSelector, validateNodeAffinity):
// nodeSelector, tolerations and node affinity. Pod (anti-)affinity and
// topology spread have no effect on one node and are not checked beyond
// their decoding.

var (
	tolerationOperators = []corev1.TolerationOperator{corev1.TolerationOpEqual, corev1.TolerationOpExists}
	taintEffects        = []corev1.TaintEffect{corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute}
	selectorOperators   = []corev1.NodeSelectorOperator{
		corev1.NodeSelectorOpIn, corev1.NodeSelectorOpNotIn, corev1.NodeSelectorOpExists,
		corev1.NodeSelectorOpDoesNotExist, corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt,
	}
)

func (pv *podValidator) scheduling(p *field.Path, spec *corev1.PodSpec) {
	pv.add(metav1validation.ValidateLabels(spec.NodeSelector, p.Child("nodeSelector"))...)
	for i, t := range spec.Tolerations {
		pv.add(toleration(p.Child("tolerations").Index(i), t)...)
	}
	if spec.Affinity == nil || spec.Affinity.NodeAffinity == nil {
		return
	}
	na, np := spec.Affinity.NodeAffinity, p.Child("affinity", "nodeAffinity")
	if r := na.RequiredDuringSchedulingIgnoredDuringExecution; r != nil {
		rp := np.Child("requiredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms")
		if len(r.NodeSelectorTerms) == 0 {
			pv.add(field.Required(rp, "must have at least one node selector term"))
		}
		for i, term := range r.NodeSelectorTerms {
			pv.add(nodeSelectorTerm(rp.Index(i), term)...)
		}
	}
	for i, pref := range na.PreferredDuringSchedulingIgnoredDuringExecution {
		pp := np.Child("preferredDuringSchedulingIgnoredDuringExecution").Index(i)
		if pref.Weight < 1 || pref.Weight > 100 {
			pv.add(field.Invalid(pp.Child("weight"), pref.Weight, "must be in the range 1-100"))
		}
		pv.add(nodeSelectorTerm(pp.Child("preference"), pref.Preference)...)
	}
}

func toleration(p *field.Path, t corev1.Toleration) field.ErrorList {
	var errs field.ErrorList
	if t.Key != "" {
		for _, msg := range validation.IsQualifiedName(t.Key) {
			errs = append(errs, field.Invalid(p.Child("key"), t.Key, msg))
		}
	} else if t.Operator != corev1.TolerationOpExists {
		errs = append(errs, field.Invalid(p.Child("operator"), t.Operator, "operator must be Exists when `key` is empty, which means \"match all values and all keys\""))
	}
	if t.TolerationSeconds != nil && t.Effect != corev1.TaintEffectNoExecute {
		errs = append(errs, field.Invalid(p.Child("effect"), t.Effect, "effect must be 'NoExecute' when `tolerationSeconds` is set"))
	}
	switch t.Operator {
	case corev1.TolerationOpEqual, "":
		for _, msg := range validation.IsValidLabelValue(t.Value) {
			errs = append(errs, field.Invalid(p.Child("value"), t.Value, msg))
		}
	case corev1.TolerationOpExists:
		if t.Value != "" {
			errs = append(errs, field.Invalid(p.Child("value"), t.Value, "value must be empty when `operator` is 'Exists'"))
		}
	default:
		errs = append(errs, field.NotSupported(p.Child("operator"), t.Operator, tolerationOperators))
	}
	if t.Effect != "" && !slices.Contains(taintEffects, t.Effect) {
		errs = append(errs, field.NotSupported(p.Child("effect"), t.Effect, taintEffects))
	}
	return errs
}

func nodeSelectorTerm(p *field.Path, term corev1.NodeSelectorTerm) field.ErrorList {
	var errs field.ErrorList
	for i, r := range term.MatchExpressions {
		rp := p.Child("matchExpressions").Index(i)
		for _, msg := range validation.IsQualifiedName(r.Key) {
			errs = append(errs, field.Invalid(rp.Child("key"), r.Key, msg))
		}
		switch r.Operator {
		case corev1.NodeSelectorOpIn, corev1.NodeSelectorOpNotIn:
			if len(r.Values) == 0 {
				errs = append(errs, field.Required(rp.Child("values"), "must be specified when `operator` is 'In' or 'NotIn'"))
			}
		case corev1.NodeSelectorOpExists, corev1.NodeSelectorOpDoesNotExist:
			if len(r.Values) > 0 {
				errs = append(errs, field.Forbidden(rp.Child("values"), "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"))
			}
		case corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt:
			if len(r.Values) != 1 {
				errs = append(errs, field.Required(rp.Child("values"), "must be specified single value when `operator` is 'Lt' or 'Gt'"))
			} else if _, err := strconv.ParseInt(r.Values[0], 10, 64); err != nil {
				errs = append(errs, field.Invalid(rp.Child("values").Index(0), r.Values[0], "must be an integer when `operator` is 'Lt' or 'Gt'"))
			}
		default:
			errs = append(errs, field.NotSupported(rp.Child("operator"), r.Operator, selectorOperators))
		}
		for j, v := range r.Values {
			for _, msg := range validation.IsValidLabelValue(v) {
				errs = append(errs, field.Invalid(rp.Child("values").Index(j), v, msg))
			}
		}
	}
	for i, r := range term.MatchFields {
		rp := p.Child("matchFields").Index(i)
		if r.Key != "metadata.name" {
			errs = append(errs, field.NotSupported(rp.Child("key"), r.Key, []string{"metadata.name"}))
		}
		switch {
		case r.Operator != corev1.NodeSelectorOpIn && r.Operator != corev1.NodeSelectorOpNotIn:
			errs = append(errs, field.NotSupported(rp.Child("operator"), r.Operator, []corev1.NodeSelectorOperator{corev1.NodeSelectorOpIn, corev1.NodeSelectorOpNotIn}))
		case len(r.Values) != 1:
			errs = append(errs, field.Required(rp.Child("values"), fmt.Sprintf("must be only one value when `operator` is '%s'", r.Operator)))
		}
	}
	return errs
}
