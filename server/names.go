package server

import (
	utilrand "k8s.io/apimachinery/pkg/util/rand"

	"github.com/podsync/podsync/validation"
)

// generateName is the API server's names.SimpleNameGenerator: prefix, cut
// to validation.MaxGenerateNameLength, and five random lower-case letters
// and digits (without vowels, so that no word is spelt).
func generateName(prefix string) string {
	if len(prefix) > validation.MaxGenerateNameLength {
		prefix = prefix[:validation.MaxGenerateNameLength]
	}
	return prefix + utilrand.String(validation.GeneratedSuffixLength)
}
