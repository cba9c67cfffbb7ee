// Package kerr classifies the errors the kernel gives the agent, so status
// says Unsupported, Immovable, Invalid or Permission instead of passing an
// errno string through.
package kerr

import (
	"errors"
	"fmt"
	"io/fs"
	"syscall"
)

// Class is the kind of a kernel refusal.
type Class string

const (
	// Unsupported: the knob does not exist on this kernel.
	Unsupported Class = "Unsupported"
	// Immovable: a managed or per-CPU IRQ refuses new affinity (EIO).
	Immovable Class = "Immovable"
	// Invalid: the kernel refused the value (EINVAL, ERANGE).
	Invalid Class = "Invalid"
	// Permission: EPERM/EACCES/EROFS.
	Permission Class = "Permission"
	// Conflict: another writer holds the target and the agent leaves it
	// alone (another sched_ext scheduler).
	Conflict Class = "Conflict"
	// Failed: anything else.
	Failed Class = "Failed"
)

// Error is a classified kernel error on one path.
type Error struct {
	Class Class
	Op    string // "read" or "write"
	Path  string
	Err   error
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s %s: %s: %v", e.Op, e.Path, e.Class, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// Refused is a refusal the agent decided before touching the kernel (a
// kernel it knows would refuse, another writer it leaves alone): Class is
// how status reports it and Reason is the setting's whole message.
type Refused struct {
	Class  Class
	Reason string
}

func (r *Refused) Error() string { return r.Reason }

// Classify wraps err with its class. A nil err stays nil.
func Classify(op, path string, err error) error {
	if err == nil {
		return nil
	}
	var ke *Error
	if errors.As(err, &ke) {
		return err
	}
	var rf *Refused
	if errors.As(err, &rf) {
		return &Error{Class: rf.Class, Op: op, Path: path, Err: err}
	}
	c := Failed
	switch {
	case errors.Is(err, fs.ErrNotExist):
		c = Unsupported
	case errors.Is(err, syscall.EINVAL), errors.Is(err, syscall.ERANGE):
		c = Invalid
	case errors.Is(err, syscall.EIO):
		c = Immovable
	case errors.Is(err, syscall.EPERM), errors.Is(err, syscall.EACCES), errors.Is(err, syscall.EROFS):
		c = Permission
	}
	return &Error{Class: c, Op: op, Path: path, Err: err}
}

// ClassOf returns the class of err (Failed for an unclassified error).
func ClassOf(err error) Class {
	var ke *Error
	if errors.As(err, &ke) {
		return ke.Class
	}
	return Failed
}
