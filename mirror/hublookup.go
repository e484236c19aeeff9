package mirror

import (
	"context"
	"sync"
)

// hubLookups is how many hubs a drain start looks up at once. A drain of
// 100 topics one-to-one into 100 hubs read their properties one at a time,
// each over a connection of its own to set up first: seconds before the
// first record was sent (issue 48). The sink paces its management calls
// within the service's limits (eventhubs.Sink); hubs it has cached answer
// at once.
const hubLookups = 16

// hubLookup is the outcome of one hub's lookup.
type hubLookup struct {
	hub Hub
	err error
}

// lookUpHubs looks up the hubs of topics' routes, hubLookups at a time, and
// returns each hub's outcome by name.
func (m *Mirror) lookUpHubs(ctx context.Context, topics []Topic) map[string]hubLookup {
	out := make(map[string]hubLookup)
	var names []string
	for _, t := range topics {
		name := m.router.Hub(t.Name)
		if _, ok := out[name]; !ok {
			out[name] = hubLookup{}
			names = append(names, name)
		}
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	slots := make(chan struct{}, hubLookups)
	for _, name := range names {
		slots <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			hub, err := m.sink.Hub(ctx, name)
			mu.Lock()
			out[name] = hubLookup{hub: hub, err: err}
			mu.Unlock()
		}()
	}
	wg.Wait()
	return out
}
