package server

import (
	"errors"

	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/convert"
	"github.com/podsync/podsync/validation"
)

// Limits of the session requests.
const (
	// maxCommandArgs and maxCommandBytes bound an exec's command.
	maxCommandArgs  = 1024
	maxCommandBytes = 64 << 10
)

// ValidateExecSyncRequest checks an ExecSync request's fields.
func (v *Validator) ValidateExecSyncRequest(req *podsyncv1.ExecSyncRequest) field.ErrorList {
	if req == nil {
		req = &podsyncv1.ExecSyncRequest{}
	}
	errs := validateContainerRef(nil, req.GetNamespace(), req.GetName(), req.GetContainer())
	errs = append(errs, validateCommand(field.NewPath("command"), req.GetCommand())...)
	if t := req.GetTimeout(); t != nil {
		if err := t.CheckValid(); err != nil || t.AsDuration() < 0 {
			errs = append(errs, field.Invalid(field.NewPath("timeout"), t.String(), "must be a non-negative duration"))
		}
	}
	return errs
}

// ValidateExecStart checks an Exec's first request; a missing start is
// an error on start.
func (v *Validator) ValidateExecStart(start *podsyncv1.ExecStart) field.ErrorList {
	p := field.NewPath("start")
	if start == nil {
		return field.ErrorList{field.Required(p, "the first request of Exec must be a start")}
	}
	errs := validateContainerRef(p, start.GetNamespace(), start.GetName(), start.GetContainer())
	return append(errs, validateCommand(p.Child("command"), start.GetCommand())...)
}

// ValidateAttachStart checks an Attach's first request.
func (v *Validator) ValidateAttachStart(start *podsyncv1.AttachStart) field.ErrorList {
	p := field.NewPath("start")
	if start == nil {
		return field.ErrorList{field.Required(p, "the first request of Attach must be a start")}
	}
	return validateContainerRef(p, start.GetNamespace(), start.GetName(), start.GetContainer())
}

// ValidatePortForwardStart checks a PortForward's first request.
func (v *Validator) ValidatePortForwardStart(start *podsyncv1.PortForwardStart) field.ErrorList {
	p := field.NewPath("start")
	if start == nil {
		return field.ErrorList{field.Required(p, "the first request of PortForward must be a start")}
	}
	errs := validatePodName(p, start.GetNamespace(), start.GetName())
	if port := start.GetPort(); port < 1 || port > 65535 {
		errs = append(errs, field.Invalid(p.Child("port"), port, "must be between 1 and 65535"))
	}
	return errs
}

func validateContainerRef(p *field.Path, namespace, name, container string) field.ErrorList {
	errs := validatePodName(p, namespace, name)
	if container != "" {
		cp := field.NewPath("container")
		if p != nil {
			cp = p.Child("container")
		}
		errs = append(errs, validation.DNS1123Label(cp, container)...)
	}
	return errs
}

func validateCommand(p *field.Path, cmd []string) field.ErrorList {
	if len(cmd) == 0 {
		return field.ErrorList{field.Required(p, "")}
	}
	if len(cmd) > maxCommandArgs {
		return field.ErrorList{field.TooMany(p, len(cmd), maxCommandArgs)}
	}
	size := 0
	for _, a := range cmd {
		size += len(a)
	}
	if size > maxCommandBytes {
		return field.ErrorList{field.TooLong(p, "", maxCommandBytes)}
	}
	return nil
}

// ValidateAddEphemeralContainerRequest checks an AddEphemeralContainer
// request and returns its container converted and defaulted, with the
// validation options the node checks it against the pod with. The
// container's content (names unique in the pod, the target, the fields a
// debug container may not have) is validated by the node against the
// stored pod.
func (v *Validator) ValidateAddEphemeralContainerRequest(req *podsyncv1.AddEphemeralContainerRequest) (corev1.EphemeralContainer, validation.Options, field.ErrorList) {
	if req == nil {
		req = &podsyncv1.AddEphemeralContainerRequest{}
	}
	opts := validation.Options{Limits: v.limits().validationLimits(), NodeName: v.nodeName(), StoredObjects: true}
	errs := validatePodName(nil, req.GetNamespace(), req.GetName())
	p := field.NewPath("ephemeralContainer")
	in := req.GetEphemeralContainer()
	if in == nil {
		return corev1.EphemeralContainer{}, opts, append(errs, field.Required(p, ""))
	}
	if n := proto.Size(req); n > v.limits().MaxRequestBytes {
		return corev1.EphemeralContainer{}, opts, append(errs, field.TooLong(nil, n, v.limits().MaxRequestBytes))
	}
	ec, err := convert.EphemeralContainerFromProto(in)
	if err != nil {
		var inv *convert.InvalidError
		if !errors.As(err, &inv) {
			return ec, opts, append(errs, field.InternalError(p, err))
		}
		return ec, opts, append(errs, inv.Errors...)
	}
	convert.DefaultEphemeralContainer(&ec)
	if ec.Name == "" {
		errs = append(errs, field.Required(p.Child("name"), ""))
	}
	if ec.Image == "" {
		errs = append(errs, field.Required(p.Child("image"), ""))
	}
	return ec, opts, errs
}
