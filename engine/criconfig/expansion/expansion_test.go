package expansion

import "testing"

func TestExpand(t *testing.T) {
	vars := map[string]string{"A": "a", "EMPTY": "", "B": "$(A)"}
	tests := []struct{ in, want string }{
		{"plain", "plain"},
		{"$(A)", "a"},
		{"x$(A)y$(A)z", "xayaz"},
		{"$(UNKNOWN)", "$(UNKNOWN)"},
		{"$(EMPTY)", ""},
		{"$$(A)", "$(A)"},
		{"$$$(A)", "$a"},
		{"$(A", "$(A"},
		{"$A", "$A"},
		{"trailing $", "trailing $"},
		{"$(B)", "$(A)"},
		{"", ""},
		{"$$", "$"},
		{"$", "$"},
		{"a$", "a$"},
		{"$x", "$x"},
		{"$()", "$()"},
		{"$(EMPTY)x", "x"},
	}
	for _, tt := range tests {
		if got := Expand(tt.in, vars); got != tt.want {
			t.Errorf("Expand(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
