package expansion

import "strings"

// Expand replaces every $(NAME) in input with vars[NAME]. A reference to an
// unknown variable is left as written, $$ is an escaped $, and a $ not
// followed by ( or $ is kept, all as the kubelet does.
func Expand(input string, vars map[string]string) string {
	return ExpandFunc(input, func(name string) (string, bool) {
		v, ok := vars[name]
		return v, ok
	})
}

// ExpandFunc is Expand with a mapping function, as the kubelet's
// expansion.Expand takes one: mapping returns a name's value and whether
// to replace the reference with it; a reference it does not replace is
// left as written.
func ExpandFunc(input string, mapping func(name string) (string, bool)) string {
	if !strings.Contains(input, "$") {
		return input
	}
	var b strings.Builder
	checkpoint := 0
	for cursor := 0; cursor < len(input); cursor++ {
		if input[cursor] != '$' || cursor+1 >= len(input) {
			continue
		}
		b.WriteString(input[checkpoint:cursor])
		rest := input[cursor+1:]
		advance := 1
		switch rest[0] {
		case '$':
			b.WriteByte('$')
		case '(':
			end := strings.IndexByte(rest, ')')
			if end < 0 {
				b.WriteString("$(")
				break
			}
			name := rest[1:end]
			if v, ok := mapping(name); ok {
				b.WriteString(v)
			} else {
				b.WriteString("$(" + name + ")")
			}
			advance = end + 1
		default:
			b.WriteByte('$')
			b.WriteByte(rest[0])
		}
		cursor += advance
		checkpoint = cursor + 1
	}
	b.WriteString(input[checkpoint:])
	return b.String()
}
