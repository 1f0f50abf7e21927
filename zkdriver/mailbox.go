package zkdriver

import "sync"

// mailbox hands values to a callback one at a time, in the order they were
// posted, on a goroutine of its own: whoever posts (a ZooKeeper watch, the
// queue's monitor) never waits for the callback, and a slow callback
// delays later values without dropping them. The release Watcher and each
// grant subscription have one.
type mailbox[T any] struct {
	mu      sync.Mutex
	pending []T
	closed  bool
	wake    chan struct{}
	stop    chan struct{}
	done    chan struct{}
}

// newMailbox starts the goroutine that calls deliver.
func newMailbox[T any](deliver func(T)) *mailbox[T] {
	m := &mailbox[T]{wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go m.run(deliver)
	return m
}

// post queues v for delivery; after close it is dropped.
func (m *mailbox[T]) post(v T) {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return
	}
	m.pending = append(m.pending, v)
	m.mu.Unlock()
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

func (m *mailbox[T]) run(deliver func(T)) {
	defer close(m.done)
	for {
		select {
		case <-m.stop:
			return
		case <-m.wake:
		}
		for {
			m.mu.Lock()
			if len(m.pending) == 0 || m.closed {
				m.mu.Unlock()
				break
			}
			v := m.pending[0]
			m.pending = m.pending[1:]
			m.mu.Unlock()
			deliver(v)
		}
	}
}

// close drops what was not delivered, and returns once the goroutine has
// ended (after a callback in progress returns). It may be called again.
func (m *mailbox[T]) close() {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		<-m.done
		return
	}
	m.closed = true
	m.pending = nil
	m.mu.Unlock()
	close(m.stop)
	<-m.done
}
