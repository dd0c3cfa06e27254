// The Observation's event queue on its own, without an agent: what a reader that falls behind
// gets, and how an observation ends.

package lockwarden

import (
	"context"
	"testing"
)

func leaderOfTerm(term int64) LeaderEvent {
	return LeaderEvent{Name: "q", Leader: &Leader{Value: "v", Term: term}, Term: term}
}

// take reads what is queued now, without waiting.
func take(o *Observation) []LeaderEvent {
	var got []LeaderEvent
	for {
		select {
		case e := <-o.Events():
			got = append(got, e)
		default:
			return got
		}
	}
}

func TestObservationKeeps16EventsThenDropsTheOldestAndMarksTheNewest(t *testing.T) {
	o := newObservation("q", nil)
	for term := int64(1); term <= 16; term++ {
		o.push(leaderOfTerm(term))
	}
	got := take(o)
	if len(got) != 16 {
		t.Fatalf("16 pushed, %d read", len(got))
	}
	for i, e := range got {
		if e.Term != int64(i+1) || e.Missed {
			t.Fatalf("event %d: %+v", i, e)
		}
	}

	// 17 more with nobody reading: the 17th drops the oldest waiting (17) and says Missed.
	for term := int64(17); term <= 33; term++ {
		o.push(leaderOfTerm(term))
	}
	if o.Leader() == nil || o.Leader().Term != 33 {
		t.Fatalf("latest leader %+v", o.Leader())
	}
	got = take(o)
	if len(got) != 16 {
		t.Fatalf("17 pushed into 16, %d read", len(got))
	}
	for i, e := range got {
		if e.Term != int64(18+i) || e.Missed != (e.Term == 33) {
			t.Fatalf("event %d: %+v", i, e)
		}
	}

	// Caught up: the next event is not marked; one the agent marked stays marked.
	o.push(leaderOfTerm(34))
	marked := leaderOfTerm(40)
	marked.Missed = true
	o.push(marked)
	if got = take(o); len(got) != 2 || got[0].Missed || !got[1].Missed || got[1].Term != 40 {
		t.Fatalf("after catching up: %+v", got)
	}
}

// A reader racing with the pushes may see any subset of the events, but always in term order,
// always the last one, and after any event it did not see, an event that says Missed.
func TestObservationFlagsEveryGapForAConcurrentReader(t *testing.T) {
	o := newObservation("q", nil)
	const pushes = 5000
	done := make(chan []LeaderEvent)
	go func() {
		var got []LeaderEvent
		for e := range o.Events() {
			got = append(got, e)
		}
		done <- got
	}()
	for term := int64(1); term <= pushes; term++ {
		o.push(leaderOfTerm(term))
	}
	o.end(CodeNotHeld)
	got := <-done
	if len(got) == 0 || got[len(got)-1].Term != pushes {
		t.Fatalf("read %d events, the last %+v", len(got), got[len(got)-1:])
	}
	// unflagged: the first event after a gap, while no event since said Missed.
	var last int64
	var unflagged *LeaderEvent
	for i, e := range got {
		if e.Term <= last {
			t.Fatalf("term %d after %d", e.Term, last)
		}
		if e.Missed {
			unflagged = nil
		} else if e.Term != last+1 && unflagged == nil {
			unflagged = &got[i]
		}
		last = e.Term
	}
	if unflagged != nil {
		t.Fatalf("events before term %d went unseen, and no event after says Missed",
			unflagged.Term)
	}
}

func TestObservationNextWaitsEndsAndReportsWhy(t *testing.T) {
	o := newObservation("q", &Leader{Value: "first", Term: 1})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := o.Next(ctx); err != context.Canceled {
		t.Fatalf("nothing queued, ctx ended: want Canceled, got %v", err)
	}
	if o.Initial.Value != "first" || o.Leader() != o.Initial || o.Err() != nil {
		t.Fatalf("initial %+v, leader %+v, err %v", o.Initial, o.Leader(), o.Err())
	}
	o.push(LeaderEvent{Name: "q", Term: 1}) // nobody leads now
	o.end(CodeDisconnected)
	o.push(leaderOfTerm(2)) // after the end: dropped
	e, err := o.Next(context.Background())
	if err != nil || e.Leader != nil || e.Term != 1 || o.Leader() != nil {
		t.Fatalf("queued before the end: %+v, %v; leader %+v", e, err, o.Leader())
	}
	_, err = o.Next(context.Background())
	wantCode(t, err, CodeDisconnected)
	wantCode(t, o.Err(), CodeDisconnected)
}
