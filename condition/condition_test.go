package condition_test

import (
	"testing"

	"github.com/loomrt/loom/condition"
	"github.com/loomrt/loom/proto/pbresource"
	"google.golang.org/protobuf/types/known/timestamppb"
)

func types(st *pbresource.Status) []string {
	var out []string
	for _, c := range st.Conditions {
		out = append(out, c.Type+"="+c.State.String())
	}
	return out
}

func TestSetReplacesInPlaceAndAppends(t *testing.T) {
	st := &pbresource.Status{}
	if !condition.Set(st, condition.True("Accepted", "Ok", "fine")) {
		t.Fatal("Set of a new condition reported no change")
	}
	if !condition.Set(st, condition.False("Ready", "Waiting", "child not ready")) {
		t.Fatal("Set of a second condition reported no change")
	}
	if condition.Set(st, condition.True("Accepted", "Ok", "fine")) {
		t.Fatal("Set of an equal condition reported a change")
	}
	if !condition.Set(st, condition.False("Accepted", "Bad", "no")) {
		t.Fatal("Set of a changed condition reported no change")
	}
	got := types(st)
	want := []string{"Accepted=STATE_FALSE", "Ready=STATE_FALSE"}
	if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("conditions %v, want %v (replaced in place, order kept)", got, want)
	}
	if c := condition.Find(st, "Accepted"); c.GetReason() != "Bad" {
		t.Fatalf("Find(Accepted) = %v, want the replacement", c)
	}
}

func TestStates(t *testing.T) {
	st := &pbresource.Status{}
	condition.Set(st, condition.True("A", "r", "m"))
	condition.Set(st, condition.False("B", "r", "m"))
	condition.Set(st, condition.Unknown("C", "r", "m"))
	for _, tc := range []struct {
		typ           string
		isTrue, isFal bool
	}{{"A", true, false}, {"B", false, true}, {"C", false, false}, {"missing", false, false}} {
		if got := condition.IsTrue(st, tc.typ); got != tc.isTrue {
			t.Errorf("IsTrue(%s) = %v", tc.typ, got)
		}
		if got := condition.IsFalse(st, tc.typ); got != tc.isFal {
			t.Errorf("IsFalse(%s) = %v", tc.typ, got)
		}
	}
	if condition.IsTrue(nil, "A") || condition.Find(nil, "A") != nil {
		t.Error("a nil status has no conditions")
	}
}

func TestRemove(t *testing.T) {
	st := &pbresource.Status{}
	condition.Set(st, condition.True("A", "r", "m"))
	condition.Set(st, condition.True("B", "r", "m"))
	condition.Set(st, condition.True("C", "r", "m"))
	kept := st.Conditions // another holder of the old slice must not see it change
	if !condition.Remove(st, "B") || condition.Remove(st, "B") {
		t.Fatal("Remove should report true once, then false")
	}
	if got := types(st); len(got) != 2 || got[0] != "A=STATE_TRUE" || got[1] != "C=STATE_TRUE" {
		t.Fatalf("after Remove(B): %v", got)
	}
	if kept[1].Type != "B" {
		t.Fatalf("Remove changed the slice it was given in place: %v", kept[1].Type)
	}
}

func TestCopyStatusIsOwnAndForgetsGeneration(t *testing.T) {
	stored := &pbresource.Status{
		ObservedGeneration: "01OLD",
		UpdatedAt:          timestamppb.Now(),
		Conditions:         []*pbresource.Condition{condition.True("A", "r", "m"), condition.True("B", "r", "m")},
	}
	res := &pbresource.Resource{Generation: "01NEW", Status: map[string]*pbresource.Status{"k": stored}}
	st := condition.CopyStatus(res, "k")
	if st.ObservedGeneration != "" || st.UpdatedAt != nil {
		t.Fatalf("copy keeps observed generation %q / updated at %v", st.ObservedGeneration, st.UpdatedAt)
	}
	condition.Set(st, condition.False("A", "x", "y"))
	if !condition.IsTrue(stored, "A") {
		t.Fatal("setting a condition on the copy changed the stored status")
	}
	if !condition.IsTrue(st, "B") {
		t.Fatal("the copy lost the condition it did not touch")
	}
	if got := condition.Get(res, "k", "B"); got != stored.Conditions[1] {
		t.Fatalf("Get = %v, want the stored condition", got)
	}
	if empty := condition.CopyStatus(res, "other"); empty == nil || len(empty.Conditions) != 0 {
		t.Fatalf("CopyStatus of a missing key = %v, want an empty status", empty)
	}
}

func TestStateName(t *testing.T) {
	for s, want := range map[pbresource.Condition_State]string{
		pbresource.Condition_STATE_TRUE:    "True",
		pbresource.Condition_STATE_FALSE:   "False",
		pbresource.Condition_STATE_UNKNOWN: "Unknown",
	} {
		if got := condition.StateName(s); got != want {
			t.Errorf("StateName(%v) = %q, want %q", s, got, want)
		}
	}
}
