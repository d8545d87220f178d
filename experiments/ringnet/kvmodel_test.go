package ringnet

import (
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/assert"
)

func op(client int, in kvInput, call, ret int64, out kvOutput) porcupine.Operation {
	return porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret}
}

// The checker bites: a read of a value older than one already read back
// (a stale read) is not linearizable, while the same reads overlapping
// the write are.
func TestPorcupineFindsAPlantedStaleRead(t *testing.T) {
	put := func(c int, v string, call, ret int64) porcupine.Operation {
		return op(c, kvInput{Op: opPut, Key: "k", Value: v}, call, ret, kvOutput{})
	}
	get := func(c int, v string, call, ret int64) porcupine.Operation {
		return op(c, kvInput{Op: opGet, Key: "k"}, call, ret, kvOutput{Value: v, Found: v != ""})
	}
	ok := []porcupine.Operation{put(0, "a", 0, 10), put(1, "b", 20, 40), get(2, "a", 25, 30), get(3, "b", 35, 50)}
	assert.Equal(t, porcupine.Ok, porcupine.CheckOperationsTimeout(kvModel, ok, time.Second))

	stale := []porcupine.Operation{put(0, "a", 0, 10), put(1, "b", 20, 30), get(2, "b", 35, 40), get(3, "a", 45, 50)}
	assert.Equal(t, porcupine.Illegal, porcupine.CheckOperationsTimeout(kvModel, stale, time.Second), "a read of a after b was read back")

	// A write that never answered may take effect late: reading it after
	// a later write is allowed; reading a value nobody wrote is not.
	late := []porcupine.Operation{put(0, "a", 0, unknownReturn), put(1, "b", 20, 30), get(2, "b", 35, 40), get(3, "a", 45, 50)}
	assert.Equal(t, porcupine.Ok, porcupine.CheckOperationsTimeout(kvModel, late, time.Second))
	phantom := []porcupine.Operation{put(0, "a", 0, 10), get(1, "z", 20, 30)}
	assert.Equal(t, porcupine.Illegal, porcupine.CheckOperationsTimeout(kvModel, phantom, time.Second))

	// Keys are independent, and a deleted key reads absent.
	del := []porcupine.Operation{put(0, "a", 0, 10), op(1, kvInput{Op: opDelete, Key: "k"}, 20, 30, kvOutput{}), get(2, "", 40, 50),
		op(3, kvInput{Op: opPut, Key: "j", Value: "x"}, 0, 5, kvOutput{}), op(3, kvInput{Op: opGet, Key: "j"}, 60, 70, kvOutput{Value: "x", Found: true})}
	assert.Equal(t, porcupine.Ok, porcupine.CheckOperationsTimeout(kvModel, del, time.Second))
}

// Pruning unread writes of unknown outcome keeps the verdict: the stale
// read is still found, and an unknown write that was read is kept.
func TestPruneUnreadKeepsTheVerdict(t *testing.T) {
	put := func(c int, v string, call, ret int64) porcupine.Operation {
		return op(c, kvInput{Op: opPut, Key: "k", Value: v}, call, ret, kvOutput{})
	}
	get := func(c int, v string, call, ret int64) porcupine.Operation {
		return op(c, kvInput{Op: opGet, Key: "k"}, call, ret, kvOutput{Value: v, Found: v != ""})
	}
	stale := []porcupine.Operation{put(0, "a", 0, 10), put(1, "b", 20, 30), put(4, "lost", 21, unknownReturn), get(2, "b", 35, 40), get(3, "a", 45, 50)}
	pruned := pruneUnread(stale)
	assert.Len(t, pruned, 4, "the unread unknown write goes")
	assert.Equal(t, porcupine.Illegal, porcupine.CheckOperationsTimeout(kvModel, pruned, time.Second))
	late := []porcupine.Operation{put(0, "a", 0, unknownReturn), put(1, "b", 20, 30), get(2, "b", 35, 40), get(3, "a", 45, 50)}
	assert.Len(t, pruneUnread(late), 4, "an unknown write that was read stays")
	assert.Equal(t, porcupine.Ok, porcupine.CheckOperationsTimeout(kvModel, pruneUnread(late), time.Second))
}
