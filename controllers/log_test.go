package controllers

import (
	"io"
	"log/slog"
)

func slogHandler(w io.Writer) slog.Handler { return slog.NewTextHandler(w, nil) }
