//go:build robustness

package robustness_test

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/anishathalye/porcupine"
)

// opKind is what a recorded call did.
type opKind int

const (
	opGetPod opKind = iota + 1
	opSyncPod
	opDeletePod
	opGetObject
	opApplyObject
)

func (k opKind) String() string {
	return [...]string{"", "GetPod", "SyncPod", "DeletePod", "GetObject", "ApplyObject"}[k]
}

// input is a call as the model sees it.
type input struct {
	Kind opKind
	// Key is "pod/NAME" or "cm/NAME".
	Key string
	// Value is the value written (SyncPod: the pod's annotation;
	// ApplyObject: the ConfigMap's data).
	Value string
	// UID is the uid of SyncPod's pod.
	UID string
	// PreRev is the revision precondition (nil: none); for an object the
	// resource_version as a number.
	PreRev *int64
	// PreUID is the uid precondition.
	PreUID string
}

// Outcomes of a call.
const (
	resOK               = "OK"
	resUnknown          = "UNKNOWN"
	resNotFound         = "NOT_FOUND"
	resRevisionMismatch = "REVISION_MISMATCH"
	resUIDMismatch      = "UID_MISMATCH"
	resAlreadyExists    = "ALREADY_EXISTS"
)

// output is a call's outcome as the model sees it.
type output struct {
	Result string
	// Found is DeletePod's found.
	Found bool
	// UID, Value, Rev and Deleting are what a read returned, or the
	// current uid and revision a failed precondition reported; Rev is an
	// object's resource_version after ApplyObject.
	UID, Value string
	Rev        int64
	Deleting   bool
}

// state is one key's register. For a pod, Rev is a lower bound of its
// revision: podsyncd moves a pod's revision with every status it
// records, which no call of the history shows. For an object, Rev is
// exact when Exact (objects change only by calls), else a lower bound.
type state struct {
	Exists, Deleting, Exact bool
	UID, Value              string
	Rev                     int64
}

func (s state) String() string {
	if !s.Exists {
		return fmt.Sprintf("absent (rev>=%d)", s.Rev)
	}
	d := ""
	if s.Deleting {
		d = " deleting"
	}
	rel := ">="
	if s.Exact {
		rel = "="
	}
	return fmt.Sprintf("%q uid %s rev%s%d%s", s.Value, short(s.UID), rel, s.Rev, d)
}

func short(uid string) string {
	if len(uid) > 8 {
		return uid[:8]
	}
	return uid
}

// model is the porcupine model of the pods and objects: each key a
// register with revisions and preconditions, partitioned by key.
var model = porcupine.NondeterministicModel{
	Init: func() []any { return []any{state{}} },
	Step: func(st, in, out any) []any {
		s, i, o := st.(state), in.(input), out.(output)
		var next []state
		if strings.HasPrefix(i.Key, "cm/") {
			next = stepObject(s, i, o)
		} else {
			for _, pre := range preStates(s) {
				next = append(next, stepPod(pre, i, o)...)
			}
		}
		out2 := make([]any, len(next))
		for j, n := range next {
			out2[j] = n
		}
		return out2
	},
	Equal: func(a, b any) bool { return a.(state) == b.(state) },
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[string][]porcupine.Operation{}
		var keys []string
		for _, op := range history {
			k := op.Input.(input).Key
			if _, ok := byKey[k]; !ok {
				keys = append(keys, k)
			}
			byKey[k] = append(byKey[k], op)
		}
		out := make([][]porcupine.Operation, 0, len(keys))
		for _, k := range keys {
			out = append(out, byKey[k])
		}
		return out
	},
	DescribeOperation: func(in, out any) string {
		i, o := in.(input), out.(output)
		var b strings.Builder
		fmt.Fprintf(&b, "%s %s", i.Kind, i.Key)
		if i.Kind == opSyncPod || i.Kind == opApplyObject {
			fmt.Fprintf(&b, " %q", i.Value)
		}
		if i.UID != "" {
			fmt.Fprintf(&b, " uid %s", short(i.UID))
		}
		if i.PreRev != nil {
			fmt.Fprintf(&b, " if-rev %d", *i.PreRev)
		}
		if i.PreUID != "" {
			fmt.Fprintf(&b, " if-uid %s", short(i.PreUID))
		}
		fmt.Fprintf(&b, " -> %s", o.Result)
		switch {
		case i.Kind == opDeletePod && o.Result == resOK:
			fmt.Fprintf(&b, " found=%t", o.Found)
		case o.Result == resOK && (i.Kind == opGetPod || i.Kind == opGetObject):
			fmt.Fprintf(&b, " %q uid %s rev %d deleting %t", o.Value, short(o.UID), o.Rev, o.Deleting)
		case o.Result == resOK && i.Kind == opApplyObject, o.Result == resRevisionMismatch, o.Result == resUIDMismatch:
			fmt.Fprintf(&b, " rev %d uid %s", o.Rev, short(o.UID))
		}
		return b.String()
	},
	DescribeState: func(st any) string { return st.(state).String() },
}

// preStates are the states a pod's call may find: s, and, while s is
// being deleted, s gone (the deletion may end at any time, after a
// restart of podsyncd too).
func preStates(s state) []state {
	if s.Exists && s.Deleting {
		return []state{s, {Rev: s.Rev + 1}}
	}
	return []state{s}
}

// checkPre says what the pod's preconditions of i may do on s: pass, and
// the revision the pod is at if they pass.
func checkPre(s state, i input) (pass bool, rev int64) {
	rev = s.Rev
	if i.PreUID != "" && (!s.Exists || s.UID != i.PreUID) {
		return false, rev
	}
	if i.PreRev != nil {
		r := *i.PreRev
		switch {
		case r == 0 && s.Exists, r != 0 && !s.Exists, r != 0 && r < s.Rev:
			return false, rev
		case r != 0:
			rev = r
		}
	}
	return true, rev
}

// mismatches are the states after a failed precondition reported as o.
func mismatches(s state, i input, o output) []state {
	uidFails := i.PreUID != "" && (!s.Exists || s.UID != i.PreUID)
	switch o.Result {
	case resUIDMismatch:
		if !uidFails {
			return nil
		}
	case resRevisionMismatch:
		if uidFails || i.PreRev == nil {
			return nil
		}
		if !s.Exists {
			if *i.PreRev == 0 || o.Rev != 0 {
				return nil
			}
			return []state{s}
		}
		if o.Rev == *i.PreRev {
			return nil
		}
	default:
		return nil
	}
	if !s.Exists {
		if o.Rev != 0 {
			return nil
		}
		return []state{s}
	}
	if o.Rev < s.Rev || o.UID != s.UID {
		return nil
	}
	s.Rev = o.Rev
	return []state{s}
}

func stepPod(s state, i input, o output) []state {
	switch i.Kind {
	case opGetPod:
		switch {
		case o.Result == resNotFound && !s.Exists:
			return []state{s}
		case o.Result == resOK && s.Exists && o.UID == s.UID && o.Value == s.Value && o.Rev >= s.Rev && (o.Deleting || !s.Deleting):
			s.Rev, s.Deleting = o.Rev, o.Deleting
			return []state{s}
		}
		return nil
	case opSyncPod:
		applied := func() []state {
			pass, rev := checkPre(s, i)
			if !pass || (s.Exists && (s.UID != i.UID || s.Deleting)) {
				return nil
			}
			if s.Exists && s.Value == i.Value {
				s.Rev = rev // unchanged: nothing written
				return []state{s}
			}
			return []state{{Exists: true, UID: i.UID, Value: i.Value, Rev: rev + 1}}
		}
		switch o.Result {
		case resOK:
			return applied()
		case resUnknown:
			return append([]state{s}, applied()...)
		case resAlreadyExists:
			if pass, rev := checkPre(s, i); pass && s.Exists && s.UID != i.UID {
				s.Rev = rev
				return []state{s}
			}
			return nil
		}
		return mismatches(s, i, o)
	case opDeletePod:
		// A deletion takes effect when it marks the pod deleting; the pod
		// is gone when its removal ends, which another call deleting the
		// pod at the same time waits for too (both answer found): so a
		// deletion that answered found leaves the pod deleting or gone.
		deleted := func() []state {
			pass, rev := checkPre(s, i)
			if !s.Exists || !pass {
				return nil
			}
			d := s
			if d.Rev = rev; !s.Deleting {
				d.Deleting, d.Rev = true, rev+1
			}
			return []state{d, {Rev: d.Rev + 1}}
		}
		switch o.Result {
		case resOK:
			if !o.Found {
				if !s.Exists {
					return []state{s}
				}
				return nil
			}
			return deleted()
		case resUnknown:
			return append([]state{s}, deleted()...)
		}
		if !s.Exists {
			return nil
		}
		return mismatches(s, i, o)
	}
	return nil
}

func stepObject(s state, i input, o output) []state {
	atLeast := func(rev int64) bool { return rev == s.Rev || (!s.Exact && rev > s.Rev) }
	switch i.Kind {
	case opGetObject:
		switch {
		case o.Result == resNotFound && !s.Exists:
			return []state{s}
		case o.Result == resOK && s.Exists && o.Value == s.Value && atLeast(o.Rev):
			s.Rev, s.Exact = o.Rev, true
			return []state{s}
		}
		return nil
	case opApplyObject:
		// pass says whether the precondition may hold, and at which
		// revision the object is then.
		pass, base := true, s.Rev
		if i.PreRev != nil {
			r := *i.PreRev
			switch {
			case r == 0:
				pass = !s.Exists
			case !s.Exists:
				pass = false
			default:
				pass, base = atLeast(r), r
			}
		}
		switch o.Result {
		case resOK:
			switch {
			case !pass:
				return nil
			case s.Exists && s.Value == i.Value:
				if o.Rev != base || !atLeast(o.Rev) {
					return nil
				}
			case o.Rev <= base:
				return nil
			}
			return []state{{Exists: true, Exact: true, Value: i.Value, Rev: o.Rev}}
		case resUnknown:
			out := []state{s}
			if pass && !(s.Exists && s.Value == i.Value) {
				out = append(out, state{Exists: true, Value: i.Value, Rev: base + 1})
			}
			return out
		case resRevisionMismatch:
			if i.PreRev == nil {
				return nil
			}
			if !s.Exists {
				if *i.PreRev != 0 && o.Rev == 0 {
					return []state{s}
				}
				return nil
			}
			if o.Rev == *i.PreRev || !atLeast(o.Rev) {
				return nil
			}
			s.Rev, s.Exact = o.Rev, true
			return []state{s}
		}
	}
	return nil
}

// revString is a revision as an object's resource_version.
func revString(r int64) string { return strconv.FormatInt(r, 10) }
