package main

import (
	"slices"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestSimpleCommand(t *testing.T) {
	tests := []struct {
		args []string
		want []string
	}{
		{[]string{"-c", "env"}, []string{"env"}},
		{[]string{"-c", "cat /etc/config/data-1"}, []string{"cat", "/etc/config/data-1"}},
		{[]string{"-c", "sleep 3600"}, []string{"sleep", "3600"}},
		// Shell syntax, builtins and assignments stay with ash.
		{[]string{"-c", "echo test > /file; sleep 240"}, nil},
		{[]string{"-c", "echo $HOME"}, nil},
		{[]string{"-c", "env | grep data"}, nil},
		{[]string{"-c", "exit 1"}, nil},
		{[]string{"-c", "A=1 env"}, nil},
		{[]string{"-c", "cat 'a b'"}, nil},
		{[]string{"-c", ""}, nil},
		{[]string{"-c", "env", "name"}, nil},
		{[]string{"script.sh"}, nil},
		{nil, nil},
	}
	for _, tt := range tests {
		if got := simpleCommand(tt.args); !slices.Equal(got, tt.want) {
			t.Errorf("simpleCommand(%q) = %q, want %q", tt.args, got, tt.want)
		}
	}
}
