package faults

import (
	"math"
	"time"

	"github.com/anishathalye/porcupine"
)

// counterOp is one operation on the counter seen through the lock: a holder's
// read-modify-write whose write the register accepted (an increment from
// From), or, when the write never took effect, just its read of From.
type counterOp struct {
	Incr bool
	From int64
}

// counterModel is a sequential counter: an operation is legal when the
// counter holds From at its linearization point; an increment adds one.
var counterModel = porcupine.Model{
	Init: func() interface{} { return int64(0) },
	Step: func(state, input, _ interface{}) (bool, interface{}) {
		s, op := state.(int64), input.(counterOp)
		if s != op.From {
			return false, s
		}
		if op.Incr {
			return true, s + 1
		}
		return true, s
	},
}

// linearizable checks that the counter, with each holder's read-modify-write
// as one operation from its read call to its write reply, behaves like an
// atomic counter in real time. That holds exactly when no two holders'
// read-modify-writes interleaved at the register. Outcomes come from the
// register's log, so a killed holder's write counts if it arrived; an
// operation whose reply nobody saw has an open end.
func linearizable(acqs []*acquisition, log []fenceOp) porcupine.CheckResult {
	type outcome struct {
		read, wrote bool
		from        int64
	}
	out := map[string]*outcome{}
	for _, op := range log {
		if !op.OK {
			continue
		}
		o := out[op.Acq]
		if o == nil {
			o = &outcome{}
			out[op.Acq] = o
		}
		if op.Write {
			o.wrote = true
		} else {
			o.read, o.from = true, op.Cur
		}
	}
	var ops []porcupine.Operation
	for i, a := range acqs {
		o := out[a.id]
		if o == nil || !o.read {
			continue
		}
		call := a.readCall
		if call == 0 {
			call = a.start // the read's own call time was never reported
		}
		ret := a.readRet
		if o.wrote {
			ret = a.writeRet
		}
		if ret == 0 {
			ret = math.MaxInt64
		}
		ops = append(ops, porcupine.Operation{
			ClientId: i, Input: counterOp{Incr: o.wrote, From: o.from}, Call: call, Return: ret,
		})
	}
	return porcupine.CheckOperationsTimeout(counterModel, ops, 20*time.Second)
}
