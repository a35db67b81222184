package predicate_test

import (
	"testing"
	"time"

	"github.com/loomrt/loom/cache"
	"github.com/loomrt/loom/predicate"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/stretchr/testify/assert"
	"google.golang.org/protobuf/types/known/timestamppb"
)

func st(gen, cond string) *pbresource.Status {
	return &pbresource.Status{ObservedGeneration: gen, Conditions: []*pbresource.Condition{{Type: cond}}}
}

func res(uid, gen string, status map[string]*pbresource.Status) *pbresource.Resource {
	return &pbresource.Resource{Id: &pbresource.ID{Name: "r", Uid: uid}, Generation: gen, Status: status}
}

func TestPredicates(t *testing.T) {
	base := res("u1", "g1", map[string]*pbresource.Status{"other": st("g1", "A")})
	for _, tc := range []struct {
		name          string
		ev            cache.Event
		genChanged    bool
		ignoreOwnStat bool
	}{
		{"creation", cache.Event{Kind: cache.Upserted, Resource: base}, true, true},
		{"deletion", cache.Event{Kind: cache.Deleted, Resource: base, Old: base}, true, true},
		{"new generation", cache.Event{Kind: cache.Upserted, Old: base,
			Resource: res("u1", "g2", base.Status)}, true, true},
		{"new uid", cache.Event{Kind: cache.Upserted, Old: base,
			Resource: res("u2", "g1", base.Status)}, true, true},
		{"own status added", cache.Event{Kind: cache.Upserted, Old: base,
			Resource: res("u1", "g1", map[string]*pbresource.Status{"other": st("g1", "A"), "own": st("g1", "A")})}, false, false},
		{"own status changed, other rewritten equal but for UpdatedAt", cache.Event{
			Kind: cache.Upserted,
			Old: res("u1", "g1", map[string]*pbresource.Status{
				"other": {ObservedGeneration: "g1", Conditions: []*pbresource.Condition{{Type: "A"}}, UpdatedAt: timestamppb.New(time.Unix(1, 0))},
				"own":   st("g1", "A"),
			}),
			Resource: res("u1", "g1", map[string]*pbresource.Status{
				"other": {ObservedGeneration: "g1", Conditions: []*pbresource.Condition{{Type: "A"}}, UpdatedAt: timestamppb.New(time.Unix(2, 0))},
				"own":   st("g1", "B"),
			})}, false, false},
		{"own status removed", cache.Event{Kind: cache.Upserted,
			Old:      res("u1", "g1", map[string]*pbresource.Status{"own": st("g1", "A")}),
			Resource: res("u1", "g1", nil)}, false, false},
		{"other status changed", cache.Event{Kind: cache.Upserted, Old: base,
			Resource: res("u1", "g1", map[string]*pbresource.Status{"other": st("g1", "B")})}, false, true},
		{"other status added", cache.Event{Kind: cache.Upserted, Old: base,
			Resource: res("u1", "g1", map[string]*pbresource.Status{"other": st("g1", "A"), "third": st("g1", "A")})}, false, true},
		{"other status removed", cache.Event{Kind: cache.Upserted, Old: base,
			Resource: res("u1", "g1", nil)}, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.genChanged, predicate.GenerationChanged()(tc.ev), "GenerationChanged")
			assert.Equal(t, tc.ignoreOwnStat, predicate.IgnoreOwnStatus("own")(tc.ev), "IgnoreOwnStatus")
		})
	}
}
