// Package condition helps a reconciler with the conditions of a status, as
// controller-runtime's meta.SetStatusCondition and FindStatusCondition do
// for Kubernetes objects: build one (True, False, Unknown), set one while
// keeping the others (Set), find one (Find, Get) and test its state
// (IsTrue, IsFalse).
//
// Conditions are told apart by their Type: a status holds at most one
// condition of each type (Set replaces it).
//
// A status read from the cache, a watch or a Read of another's is
// read-only (see package resource, "Who may change a message"): change the
// copy CopyStatus gives, never the stored one.
package condition

import (
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
)

// True returns a condition of type typ that holds.
func True(typ, reason, message string) *pbresource.Condition {
	return newCondition(typ, pbresource.Condition_STATE_TRUE, reason, message)
}

// False returns a condition of type typ that does not hold.
func False(typ, reason, message string) *pbresource.Condition {
	return newCondition(typ, pbresource.Condition_STATE_FALSE, reason, message)
}

// Unknown returns a condition of type typ whose state is not known yet.
func Unknown(typ, reason, message string) *pbresource.Condition {
	return newCondition(typ, pbresource.Condition_STATE_UNKNOWN, reason, message)
}

func newCondition(typ string, state pbresource.Condition_State, reason, message string) *pbresource.Condition {
	return &pbresource.Condition{Type: typ, State: state, Reason: reason, Message: message}
}

// Set puts c into st, replacing the condition of the same Type where it
// is (so the order of the conditions, which resource.EqualStatus compares,
// stays put) or appending it, and reports whether st changed. st keeps c
// itself, not a copy. st must be the caller's own (see CopyStatus).
func Set(st *pbresource.Status, c *pbresource.Condition) bool {
	for i, old := range st.Conditions {
		if old.GetType() != c.GetType() {
			continue
		}
		if resource.EqualCondition(old, c) {
			return false
		}
		st.Conditions[i] = c
		return true
	}
	st.Conditions = append(st.Conditions, c)
	return true
}

// Remove takes the condition of type typ out of st and reports whether st
// had one. st must be the caller's own (see CopyStatus).
func Remove(st *pbresource.Status, typ string) bool {
	for i, c := range st.GetConditions() {
		if c.GetType() == typ {
			st.Conditions = append(st.Conditions[:i:i], st.Conditions[i+1:]...)
			return true
		}
	}
	return false
}

// Find returns the condition of type typ in st, or nil when st (which may
// be nil) has none. It is st's own: read-only if st is.
func Find(st *pbresource.Status, typ string) *pbresource.Condition {
	for _, c := range st.GetConditions() {
		if c.GetType() == typ {
			return c
		}
	}
	return nil
}

// Get returns the condition of type typ in res's status under key, or nil
// when there is none. It is res's own: read-only if res is.
func Get(res *pbresource.Resource, key, typ string) *pbresource.Condition {
	return Find(res.GetStatus()[key], typ)
}

// IsTrue reports whether st has a condition of type typ that holds.
func IsTrue(st *pbresource.Status, typ string) bool {
	return Find(st, typ).GetState() == pbresource.Condition_STATE_TRUE
}

// IsFalse reports whether st has a condition of type typ that does not
// hold. A missing condition is neither true nor false.
func IsFalse(st *pbresource.Status, typ string) bool {
	return Find(st, typ).GetState() == pbresource.Condition_STATE_FALSE
}

// CopyStatus returns the caller's own copy of res's status under key (an
// empty status when there is none), to Set conditions on and write back
// with reconcile.Runtime.WriteStatus while keeping the conditions the
// reconciler does not touch this time.
//
// The copy's ObservedGeneration and UpdatedAt are cleared: WriteStatus
// stamps the resource's current generation on a status that names none,
// and a status carried over from an earlier generation must not claim to
// have observed this one before the reconciler has.
func CopyStatus(res *pbresource.Resource, key string) *pbresource.Status {
	st := resource.CloneStatus(res.GetStatus()[key])
	if st == nil {
		return &pbresource.Status{}
	}
	st.ObservedGeneration = ""
	st.UpdatedAt = nil
	return st
}

// StateName is a condition state as people read it: "True", "False" or
// "Unknown", as Kubernetes writes condition statuses.
func StateName(s pbresource.Condition_State) string {
	switch s {
	case pbresource.Condition_STATE_TRUE:
		return "True"
	case pbresource.Condition_STATE_FALSE:
		return "False"
	default:
		return "Unknown"
	}
}
