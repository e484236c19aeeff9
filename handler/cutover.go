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
	Confirm        bool   `json:"confirm"`
	By             string `json:"by"`
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
		return a.cutoverError(c, err)
	}
	by := caller(req)
	if b.By != "" {
		by += " (" + b.By + ")"
	}
	ctx := c.Request().Context()
	routes, mirrored, err := cutover.Mirrored(ctx, a.source, a.settings.Topics, a.settings.Routes, b.Topics)
	if err != nil {
		return a.cutoverError(c, err)
	}
	cr := cutover.Request{Group: b.Group, Topics: routes, Explicit: len(b.Topics) > 0, MirrorCommitted: mirrored,
		Namespace: b.Namespace, ConsumerGroup: b.ConsumerGroup, Force: b.Force, Confirm: b.Confirm, By: by}
	if cr.Namespace == "" {
		if cr.Namespace, err = a.sink.Namespace(); err != nil {
			return a.cutoverError(c, err)
		}
	}
	if cr.ConsumerGroup == "" {
		cr.ConsumerGroup = "$Default"
	}
	var store cutover.CheckpointWriter
	if b.Confirm {
		s, err := a.checkpointStore(b)
		if err != nil {
			return a.cutoverError(c, err)
		}
		store = s
	}
	res, err := cutover.Run(ctx, a.source, a.sink, store, cr, a.logger)
	if err != nil {
		return a.cutoverError(c, err)
	}
	msg := fmt.Sprintf("cut-over of %s to %s: dry run, nothing written; %d event(s) would be delivered again (the watermarks drop them); send \"confirm\": true to write the checkpoints",
		b.Group, strings.Join(res.Hubs, ", "), res.Redelivered)
	if res.Written {
		msg = fmt.Sprintf("cut-over of %s to %s: %d checkpoint blob(s) written for consumer group %s by %s; %d event(s) will be delivered again (the watermarks drop them)",
			b.Group, strings.Join(res.Hubs, ", "), len(res.Blobs), cr.ConsumerGroup, by, res.Redelivered)
	}
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
// the group has members or the mirror is behind it, 503 otherwise.
func (a *app) cutoverError(c echo.Context, err error) error {
	status := http.StatusServiceUnavailable
	body := map[string]string{"error": err.Error()}
	var ie *cutover.InputError
	var mie *mirror.InputError
	switch {
	case errors.As(err, &ie):
		status, body["field"] = http.StatusBadRequest, ie.Field
	case errors.As(err, &mie):
		status, body["field"] = http.StatusBadRequest, mie.Field
	case errors.Is(err, cutover.ErrGroupActive), errors.Is(err, cutover.ErrMirrorBehind):
		status = http.StatusConflict
	}
	msg := "cut-over refused: " + err.Error()
	a.logger.Warn(msg)
	return a.respondHTTP(c, status, body, msg)
}
