package ringnet

import (
	"fmt"
	"math"

	"github.com/anishathalye/porcupine"
)

// The kv-chaos history and its sequential specification for Porcupine:
// each key is a register that is absent or holds a value; a history is
// linearizable iff every key's is, so it is checked key by key.

type kvOp uint8

const (
	opPut kvOp = iota
	opGet
	opDelete
)

func (o kvOp) String() string { return [...]string{"put", "get", "delete"}[o] }

// kvInput is what a client asked.
type kvInput struct {
	Op         kvOp
	Key, Value string
}

// kvOutput is what a read answered; writes answer nothing the model needs.
type kvOutput struct {
	Value string
	Found bool
}

// unknownReturn stands for "never answered": a write whose outcome is
// unknown (a timeout, a 503 that may have taken effect) may take effect at
// any time after its call, so its interval runs to the end of time.
const unknownReturn = math.MaxInt64 / 2

type register struct {
	value string
	set   bool
}

var kvModel = porcupine.Model{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[string][]porcupine.Operation{}
		var keys []string
		for _, op := range history {
			k := op.Input.(kvInput).Key
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
	Init: func() interface{} { return register{} },
	Step: func(state, input, output interface{}) (bool, interface{}) {
		r, in := state.(register), input.(kvInput)
		switch in.Op {
		case opPut:
			return true, register{value: in.Value, set: true}
		case opDelete:
			return true, register{}
		}
		out := output.(kvOutput)
		return out.Found == r.set && (!r.set || out.Value == r.value), r
	},
	DescribeOperation: func(input, output interface{}) string {
		in := input.(kvInput)
		switch in.Op {
		case opPut:
			return fmt.Sprintf("put(%q, %q)", in.Key, in.Value)
		case opDelete:
			return fmt.Sprintf("delete(%q)", in.Key)
		}
		out, _ := output.(kvOutput)
		if !out.Found {
			return fmt.Sprintf("get(%q) → absent", in.Key)
		}
		return fmt.Sprintf("get(%q) → %q", in.Key, out.Value)
	},
	DescribeState: func(state interface{}) string {
		r := state.(register)
		if !r.set {
			return "absent"
		}
		return fmt.Sprintf("%q", r.value)
	},
}
