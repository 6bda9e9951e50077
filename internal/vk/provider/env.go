package provider

import (
	"cmp"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Services reads the API server's Services, as a lister does.
type Services interface {
	// Services returns the Services of namespace.
	Services(namespace string) ([]*corev1.Service, error)
}

// UseServices gives the provider the Services its pods' service
// environment variables name; call it before the first pod. Without
// them, containers get none.
func (p *Provider) UseServices(s Services) { p.services = s }

// addServiceEnv gives each container of pod the kubelet's service
// environment variables (getServiceEnvVarMap, envvars.FromServices): those
// of the default namespace's kubernetes Service always, and, unless
// enableServiceLinks is false, those of the Services of the pod's
// namespace. As the kubelet's, they are the container's least: a variable
// its env or envFrom defines wins, and its env may refer to them with
// $(VAR). So they come first in env, sorted by name, and leave out the
// names env and envFrom define.
func (p *Provider) addServiceEnv(pod *corev1.Pod) error {
	if p.services == nil {
		return nil
	}
	env, err := p.serviceEnv(pod)
	if err != nil || len(env) == 0 {
		return err
	}
	for _, cs := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range cs {
			c := &cs[i]
			defined, err := p.definedNames(pod.Namespace, c)
			if err != nil {
				return err
			}
			var add []corev1.EnvVar
			for _, e := range env {
				if !defined[e.Name] {
					add = append(add, e)
				}
			}
			c.Env = append(add, c.Env...)
		}
	}
	return nil
}

// serviceEnv is the service environment of a pod, sorted by name.
func (p *Provider) serviceEnv(pod *corev1.Pod) ([]corev1.EnvVar, error) {
	byName := map[string]*corev1.Service{}
	defaults, err := p.services.Services(metav1.NamespaceDefault)
	if err != nil {
		return nil, fmt.Errorf("list services: %w", err)
	}
	for _, s := range defaults {
		if s.Name == "kubernetes" && serviceIPSet(s) {
			byName[s.Name] = s
		}
	}
	if pod.Spec.EnableServiceLinks == nil || *pod.Spec.EnableServiceLinks {
		own, err := p.services.Services(pod.Namespace)
		if err != nil {
			return nil, fmt.Errorf("list services: %w", err)
		}
		for _, s := range own {
			if serviceIPSet(s) {
				byName[s.Name] = s
			}
		}
	}
	var env []corev1.EnvVar
	for _, s := range byName {
		env = append(env, fromService(s)...)
	}
	slices.SortFunc(env, func(a, b corev1.EnvVar) int { return cmp.Compare(a.Name, b.Name) })
	return env, nil
}

// definedNames are the variables c's env and envFrom define: envFrom's
// from the keys of the ConfigMaps and Secrets it names (with its prefix),
// which are read where they are pushed from (a missing one defines none).
func (p *Provider) definedNames(namespace string, c *corev1.Container) (map[string]bool, error) {
	out := map[string]bool{}
	for _, e := range c.Env {
		out[e.Name] = true
	}
	for _, from := range c.EnvFrom {
		var keys []string
		switch {
		case from.ConfigMapRef != nil && p.objects != nil:
			cm, err := p.objects.ConfigMap(namespace, from.ConfigMapRef.Name)
			if err != nil && !apierrors.IsNotFound(err) {
				return nil, fmt.Errorf("configmap %s/%s: %w", namespace, from.ConfigMapRef.Name, err)
			}
			if cm != nil {
				for k := range cm.Data {
					keys = append(keys, k)
				}
				for k := range cm.BinaryData {
					keys = append(keys, k)
				}
			}
		case from.SecretRef != nil && p.objects != nil:
			s, err := p.objects.Secret(namespace, from.SecretRef.Name)
			if err != nil && !apierrors.IsNotFound(err) {
				return nil, fmt.Errorf("secret %s/%s: %w", namespace, from.SecretRef.Name, err)
			}
			if s != nil {
				for k := range s.Data {
					keys = append(keys, k)
				}
				for k := range s.StringData {
					keys = append(keys, k)
				}
			}
		}
		for _, k := range keys {
			out[from.Prefix+k] = true
		}
	}
	return out, nil
}

// serviceIPSet is the kubelet's IsServiceIPSet.
func serviceIPSet(s *corev1.Service) bool {
	return s.Spec.ClusterIP != corev1.ClusterIPNone && s.Spec.ClusterIP != "" && len(s.Spec.Ports) > 0
}

// fromService is the kubelet's envvars.FromServices of one Service.
func fromService(s *corev1.Service) []corev1.EnvVar {
	prefix := envName(s.Name)
	out := []corev1.EnvVar{
		{Name: prefix + "_SERVICE_HOST", Value: s.Spec.ClusterIP},
		{Name: prefix + "_SERVICE_PORT", Value: strconv.Itoa(int(s.Spec.Ports[0].Port))},
	}
	for _, sp := range s.Spec.Ports {
		if sp.Name != "" {
			out = append(out, corev1.EnvVar{Name: prefix + "_SERVICE_PORT_" + envName(sp.Name), Value: strconv.Itoa(int(sp.Port))})
		}
	}
	for i, sp := range s.Spec.Ports {
		protocol := string(corev1.ProtocolTCP)
		if sp.Protocol != "" {
			protocol = string(sp.Protocol)
		}
		addr := strings.ToLower(protocol) + "://" + net.JoinHostPort(s.Spec.ClusterIP, strconv.Itoa(int(sp.Port)))
		if i == 0 {
			out = append(out, corev1.EnvVar{Name: prefix + "_PORT", Value: addr})
		}
		pp := fmt.Sprintf("%s_PORT_%d_%s", prefix, sp.Port, strings.ToUpper(protocol))
		out = append(out, corev1.EnvVar{Name: pp, Value: addr}, corev1.EnvVar{Name: pp + "_PROTO", Value: strings.ToLower(protocol)},
			corev1.EnvVar{Name: pp + "_PORT", Value: strconv.Itoa(int(sp.Port))}, corev1.EnvVar{Name: pp + "_ADDR", Value: s.Spec.ClusterIP})
	}
	return out
}

// envName is the kubelet's makeEnvVariableName.
func envName(s string) string { return strings.ToUpper(strings.ReplaceAll(s, "-", "_")) }
