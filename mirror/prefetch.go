package mirror

import "context"

// prefetcher keeps the next fetch of one partition in flight while the
// reader hands the records of the previous one over to the senders, so that
// a distant Kafka's round trip overlaps with the work instead of adding to
// it. It holds at most one fetch (FetchBytes) per partition beyond the
// in-flight bound.
type prefetcher struct {
	d       *drain
	tp      TopicPartition
	pending *pendingFetch
}

// pendingFetch is one fetch running in the background.
type pendingFetch struct {
	offset int64
	done   chan struct{}
	f      Fetched
	err    error
	cancel context.CancelFunc
}

// fetch returns the fetch at offset: the prefetched one when it is for
// offset, a new one otherwise.
func (p *prefetcher) fetch(ctx context.Context, offset int64) (Fetched, error) {
	if pf := p.pending; pf != nil {
		p.pending = nil
		if pf.offset == offset {
			select {
			case <-pf.done:
				pf.cancel()
				return pf.f, pf.err
			case <-ctx.Done():
				pf.cancel()
				<-pf.done
				return Fetched{Next: offset}, ctx.Err()
			}
		}
		pf.cancel()
		<-pf.done
	}
	return p.d.m.source.Fetch(ctx, p.tp, offset, p.d.m.opts.FetchBytes)
}

// start fetches from offset in the background, for the next fetch call.
func (p *prefetcher) start(ctx context.Context, offset int64) {
	p.stop()
	fctx, cancel := context.WithCancel(ctx)
	pf := &pendingFetch{offset: offset, done: make(chan struct{}), cancel: cancel}
	p.pending = pf
	go func() {
		defer close(pf.done)
		pf.f, pf.err = p.d.m.source.Fetch(fctx, p.tp, offset, p.d.m.opts.FetchBytes)
	}()
}

// stop abandons a pending fetch (nothing of it was consumed) and waits for
// it to end.
func (p *prefetcher) stop() {
	if pf := p.pending; pf != nil {
		p.pending = nil
		pf.cancel()
		<-pf.done
	}
}
