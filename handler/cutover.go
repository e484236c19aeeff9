package main

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/ehmirror/ehmirror/checkpointstore"
	"github.com/ehmirror/ehmirror/config"
	"github.com/ehmirror/ehmirror/cutover"
	"github.com/ehmirror/ehmirror/mirror"
)

// cutoverBody is the JSON body of POST /api/cutover.
type cutoverBody struct {
	// Group is the application's Kafka consumer group to move.
	Group string `json:"group"`
	// Topics narrows the mirrored topics (default: those the group
	// committed on).
	Topics []string `json:"topics"`
	// Namespace is the fully qualified Event Hubs namespace as the
	// consumers spell it (default: the mirror's).
	Namespace string `json:"namespace"`
	// ConsumerGroup is the Event Hubs consumer group (default $Default).
	ConsumerGroup string `json:"consumer_group"`
	// BlobServiceURI and Container override the settings; a URI is used
	// with the app's identity (never a key in a request).
	BlobServiceURI string `json:"blob_service_uri"`
	Container      string `json:"container"`
	Force          bool   `json:"force"`
	// AllowBackward writes checkpoints older than those already stored
	// (a consumer read further); without it such a cut-over is refused.
	AllowBackward bool   `json:"allow_backward"`
	Confirm       bool   `json:"confirm"`
	By            string `json:"by"`
}

// cutoverRoute plans (dry run, the default) or writes the Event Hubs
// checkpoints of a Kafka consumer group's cut-over.
func (a *app) cutoverRoute(c echo.Context) error {
	req, ok, err := a.httpRequest(c)
	if !ok {
		return err
	}
	if len(a.problems) > 0 {
		return a.respondHTTP(c, http.StatusServiceUnavailable, map[string]any{"error": "invalid settings", "problems": a.problems}, a.problemLines()...)
	}
	var b cutoverBody
	if err := decodeBody(req.Body, &b); err != nil {
		return a.cutoverError(c, nil, err)
	}
	by := caller(req)
	if b.By != "" {
		by += " (" + b.By + ")"
	}
	ctx := c.Request().Context()
	var store cutover.CheckpointStore
	s, err := a.checkpointStore(b)
	switch {
	case err == nil:
		store = s
	case b.Confirm:
		return a.cutoverError(c, nil, err)
	}
	m, err := cutover.Mirrored(ctx, a.source, a.settings.Topics, a.settings.Routes, b.Topics)
	if err != nil {
		return a.cutoverError(c, nil, err)
	}
	cr := cutover.Request{Group: b.Group, Topics: m.Topics, Explicit: len(b.Topics) > 0, MirrorCommitted: m.Committed, MirrorEnds: m.Ends,
		Namespace: b.Namespace, ConsumerGroup: b.ConsumerGroup, Force: b.Force, AllowBackward: b.AllowBackward, Confirm: b.Confirm, By: by}
	if cr.Namespace == "" {
		if cr.Namespace, err = a.sink.Namespace(); err != nil {
			return a.cutoverError(c, nil, err)
		}
	}
	if cr.ConsumerGroup == "" {
		cr.ConsumerGroup = "$Default"
	}
	res, err := cutover.Run(ctx, a.source, a.sink, store, cr, a.logger)
	if err != nil {
		return a.cutoverError(c, res, err)
	}
	msg := cutover.Summary(res, `send "confirm": true`, `"allow_backward": true`)
	return a.respondHTTP(c, http.StatusOK, map[string]any{"dry_run": !res.Written, "message": msg, "cutover": res}, msg)
}

// checkpointStore opens the container named by the request or the
// settings.
func (a *app) checkpointStore(b cutoverBody) (*checkpointstore.Store, error) {
	if len(a.cutoverProblems) > 0 {
		return nil, &cutover.InputError{Field: a.cutoverProblems[0].Setting, Msg: a.cutoverProblems[0].Message}
	}
	container := b.Container
	if container == "" {
		container = a.cutover.Container
	}
	if container == "" {
		return nil, &cutover.InputError{Field: "container", Msg: fmt.Sprintf("missing: name the blob container in the request or in %s", config.CutoverContainer)}
	}
	uri := b.BlobServiceURI
	if uri == "" && a.cutover.StorageConnectionString != "" {
		return checkpointstore.New(checkpointstore.Options{ConnectionString: a.cutover.StorageConnectionString, Container: container})
	}
	if uri == "" {
		uri = a.cutover.BlobServiceURI
	}
	if uri == "" {
		return nil, &cutover.InputError{Field: "blob_service_uri", Msg: fmt.Sprintf("missing: set %s or %s, or send blob_service_uri", config.CutoverStorage, config.CutoverStorageURI)}
	}
	cred, err := credential(a.settings.EventHubsClientID)
	if err != nil {
		return nil, err
	}
	return checkpointstore.New(checkpointstore.Options{ContainerURL: strings.TrimSuffix(uri, "/") + "/" + container, Credential: cred})
}

// cutoverError answers a refused cut-over: 400 naming the field, 409 while
// the group has members, the mirror is behind it, a planned checkpoint is
// older than the stored one or a checkpoint changed meanwhile, 503
// otherwise. res, when not nil, is the plan so far (what was written
// before a store failed, the partitions that would move backward).
func (a *app) cutoverError(c echo.Context, res *cutover.Result, err error) error {
	status := http.StatusServiceUnavailable
	body := map[string]any{"error": err.Error()}
	if res != nil {
		body["cutover"] = res
	}
	var ie *cutover.InputError
	var mie *mirror.InputError
	switch {
	case errors.As(err, &ie):
		status, body["field"] = http.StatusBadRequest, ie.Field
	case errors.As(err, &mie):
		status, body["field"] = http.StatusBadRequest, mie.Field
	case errors.Is(err, cutover.ErrGroupActive), errors.Is(err, cutover.ErrMirrorBehind),
		errors.Is(err, cutover.ErrBackward), errors.Is(err, cutover.ErrCheckpointChanged):
		status = http.StatusConflict
	}
	msg := "cut-over refused: " + err.Error()
	a.logger.Warn(msg)
	return a.respondHTTP(c, status, body, msg)
}
