package controller

import (
	"fmt"
	"testing"

	"github.com/loomrt/loom/proto/pbresource"
	"github.com/stretchr/testify/assert"
)

func recentNames(r *recentChanges) []string {
	var out []string
	for _, id := range r.newestFirst() {
		out = append(out, id.Name)
	}
	return out
}

// TestRecentChangesKeepsTheLastBoundNewestFirst: the record holds the last
// bound changes, newest first, before and after it wraps around.
func TestRecentChangesKeepsTheLastBoundNewestFirst(t *testing.T) {
	r := newRecentChanges(3)
	assert.Empty(t, recentNames(r))
	add := func(names ...string) {
		for _, n := range names {
			r.add(&pbresource.ID{Name: n})
		}
	}
	add("a", "b")
	assert.Equal(t, []string{"b", "a"}, recentNames(r))
	add("c")
	assert.Equal(t, []string{"c", "b", "a"}, recentNames(r))
	add("d", "e")
	assert.Equal(t, []string{"e", "d", "c"}, recentNames(r))
	for i := 0; i < 7; i++ {
		add(fmt.Sprint(i))
	}
	assert.Equal(t, []string{"6", "5", "4"}, recentNames(r))
	assert.Len(t, r.ids, 3, "the record grew past its bound")
}

// TestRecentChangesAddDoesNotAllocate: add is on the path of every cache
// event; once the record is full it allocates nothing.
func TestRecentChangesAddDoesNotAllocate(t *testing.T) {
	r := newRecentChanges(recentChangesPerType)
	id := &pbresource.ID{Name: "x"}
	assert.Zero(t, testing.AllocsPerRun(2*recentChangesPerType, func() { r.add(id) }))
}
