package mirror

import (
	"context"
	"time"
)

// WriteResetRequest writes req (its Topics named) to the control records
// for the follower of another instance, to be taken until until, as
// Service.ResetOffsets does when the group has members elsewhere, and
// returns the request's id. A test sets a deadline of its own to give
// several followers the time to see one request.
func (m *Mirror) WriteResetRequest(ctx context.Context, req ResetRequest, until time.Time) (string, error) {
	return m.writeResetRequest(ctx, req, until)
}
