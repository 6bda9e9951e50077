package main

import (
	"fmt"
	"strings"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// requestKind is a kind of API request the benchmark counts the agent's
// by, each in a flow schema of its own: what an agent spends its
// requests on per pod.
type requestKind int

const (
	reqPodStatus requestKind = iota
	reqEvents
	reqTokens
	reqLeases
	reqNodes
	reqOther // everything else: the pods' reads and watches, objects, …
	numRequestKinds
)

// requestCounts are requests by kind.
type requestCounts [numRequestKinds]float64

// total is the requests of every kind.
func (c requestCounts) total() float64 {
	var sum float64
	for _, v := range c {
		sum += v
	}
	return sum
}

// requestKinds names each kind (its column, and its flow schema's
// suffix) and the resources it matches; reqOther matches what no other
// does.
var requestKinds = [numRequestKinds]struct {
	name  string
	rules []flowcontrolv1.ResourcePolicyRule
}{
	reqPodStatus: {"pod status", []flowcontrolv1.ResourcePolicyRule{{APIGroups: []string{""}, Resources: []string{"pods/status"}}}},
	reqEvents:    {"events", []flowcontrolv1.ResourcePolicyRule{{APIGroups: []string{"", "events.k8s.io"}, Resources: []string{"events"}}}},
	reqTokens:    {"tokens", []flowcontrolv1.ResourcePolicyRule{{APIGroups: []string{""}, Resources: []string{"serviceaccounts/token"}}}},
	reqLeases:    {"leases", []flowcontrolv1.ResourcePolicyRule{{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}}}},
	reqNodes: {"nodes", []flowcontrolv1.ResourcePolicyRule{{APIGroups: []string{""}, Resources: []string{"nodes", "nodes/status"},
		ClusterScope: true}}},
	reqOther: {"other", []flowcontrolv1.ResourcePolicyRule{{APIGroups: []string{"*"}, Resources: []string{"*"},
		ClusterScope: true, Namespaces: []string{"*"}}}},
}

// flowSchemaName is the flow schema of the agent's requests of kind k.
func flowSchemaName(k requestKind) string {
	if k == reqOther {
		return agentUser
	}
	return agentUser + "-" + strings.ReplaceAll(requestKinds[k].name, " ", "-")
}

// requestKindOf is the kind whose flow schema is name, or false.
func requestKindOf(name string) (requestKind, bool) {
	for k := range numRequestKinds {
		if flowSchemaName(k) == name {
			return k, true
		}
	}
	return 0, false
}

// agentFlowSchemas are agentUser's flow schemas, all on the exempt
// priority level: one per kind, and the catch-all (reqOther) after them
// with its non-resource requests.
func agentFlowSchemas() []*flowcontrolv1.FlowSchema {
	var out []*flowcontrolv1.FlowSchema
	for k := range numRequestKinds {
		precedence := int32(2)
		rules := append([]flowcontrolv1.ResourcePolicyRule(nil), requestKinds[k].rules...)
		for i := range rules {
			rules[i].Verbs = []string{"*"}
			if !rules[i].ClusterScope {
				rules[i].Namespaces = []string{"*"}
			}
		}
		rule := flowcontrolv1.PolicyRulesWithSubjects{
			Subjects:      []flowcontrolv1.Subject{{Kind: flowcontrolv1.SubjectKindUser, User: &flowcontrolv1.UserSubject{Name: agentUser}}},
			ResourceRules: rules,
		}
		if k == reqOther {
			precedence = 3
			rule.NonResourceRules = []flowcontrolv1.NonResourcePolicyRule{{Verbs: []string{"*"}, NonResourceURLs: []string{"*"}}}
		}
		out = append(out, &flowcontrolv1.FlowSchema{ObjectMeta: metav1.ObjectMeta{Name: flowSchemaName(k)},
			Spec: flowcontrolv1.FlowSchemaSpec{
				PriorityLevelConfiguration: flowcontrolv1.PriorityLevelConfigurationReference{Name: flowcontrolv1.PriorityLevelConfigurationNameExempt},
				MatchingPrecedence:         precedence,
				Rules:                      []flowcontrolv1.PolicyRulesWithSubjects{rule},
			}})
	}
	return out
}

// renderScaleRequests is the agents' API requests per pod by kind: where
// podsync-vk's requests go beside kwok's.
func renderScaleRequests(w *strings.Builder, res *scaleResults) {
	p := func(format string, a ...any) { fmt.Fprintf(w, format, a...) }
	p("\n**The agent's API requests per pod, by kind** (its requests during the workload ÷ pods; \"other\" is its reads, lists and watches, and any other resource):\n\n| nodes | system |")
	for k := range numRequestKinds {
		p(" %s |", requestKinds[k].name)
	}
	p("\n|---|---|%s\n", strings.Repeat("---|", int(numRequestKinds)))
	for _, c := range res.cells() {
		if len(c.runs) == 0 {
			continue
		}
		p("| %d | %s |", c.nodes, c.sys)
		for k := range numRequestKinds {
			p(" %s |", c.stat(func(r *scaleRun) float64 { return perPod(r.agentByKind[k], r) }).num("%.2f"))
		}
		p("\n")
	}
}
