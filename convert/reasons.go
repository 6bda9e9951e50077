package convert

import (
	"fmt"
	"regexp"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/podsync/podsync/validation"
)

// unsupportedReasons say, for the fields podsync refuses that manifests
// often carry, why in one clause and what to do. Paths have their list
// indexes as "[*]".
var unsupportedReasons = map[string]string{
	"spec.ephemeralContainers":                                 "ephemeral containers are added to a running pod with podsyncctl debug (AddEphemeralContainer), not in its manifest; remove them",
	"spec.readinessGates":                                      "readiness gates are set by controllers podsync does not run; remove them",
	"spec.resourceClaims":                                      "dynamic resource allocation needs an API server podsync does not have; remove it",
	"spec.containers[*].resources.claims":                      "dynamic resource allocation needs an API server podsync does not have; remove it",
	"spec.volumes[*].projected.sources[*].serviceAccountToken": noTokens,
	"spec.volumes[*].projected.sources[*].clusterTrustBundle":  noTokens,
	"spec.volumes[*].projected.sources[*].podCertificate":      noTokens,
	"metadata.finalizers":                                      "finalizers are for controllers podsync does not run; remove them",
	"spec.resources.claims":                                    "dynamic resource allocation needs an API server podsync does not have; remove it",
	"spec.schedulingGates":                                     "scheduling gates are removed by controllers podsync does not run, so the pod would never start; remove them",
}

// noTokens is the reason of a projected source only an API server serves.
const noTokens = validation.NoTokensReason

// unsupportedDefault is the reason of a field without one of its own.
const unsupportedDefault = "not supported by podsync; remove it (README's field table lists what podsync runs)"

var listIndex = regexp.MustCompile(`\[\d+\]`)

// unsupported is the error of a field podsync does not support, with its
// reason; a scalar value is named ("value \"gvisor\": …").
func unsupported(path *field.Path, value any) *field.Error {
	reason, ok := unsupportedReasons[listIndex.ReplaceAllString(path.String(), "[*]")]
	if !ok {
		reason = unsupportedDefault
	}
	switch v := value.(type) {
	case string:
		reason = fmt.Sprintf("value %q: %s", v, reason)
	case bool, float64:
		reason = fmt.Sprintf("value %v: %s", v, reason)
	}
	return field.Forbidden(path, reason)
}
