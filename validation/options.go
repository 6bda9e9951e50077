package validation

import (
	"math"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Defaults of Limits.
const (
	DefaultMaxContainersPerPod     = 64
	DefaultMaxEnvVarsPerContainer  = 512
	DefaultMaxEnvBytesPerContainer = 1 << 20
	DefaultMaxConfigMapBytes       = 1 << 20
	DefaultMaxSecretBytes          = 1 << 20
	DefaultMaxGracePeriodSeconds   = 3600
)

// Limits bound the size of what one object may hold. A zero (or negative)
// field takes its default, so the zero Limits is DefaultLimits.
type Limits struct {
	// MaxContainersPerPod bounds a pod's init and regular containers
	// together. Default 64.
	MaxContainersPerPod int
	// MaxEnvVarsPerContainer bounds a container's env list. Default 512.
	MaxEnvVarsPerContainer int
	// MaxEnvBytesPerContainer bounds the names and values of a container's
	// env list together, in bytes. Default 1 MiB: Linux refuses to start a
	// process whose arguments and environment exceed ARG_MAX (2 MiB with
	// the default stack limit).
	MaxEnvBytesPerContainer int
	// MaxConfigMapBytes bounds the keys and values of one ConfigMap's data
	// and binaryData together. Default 1 MiB, as in Kubernetes.
	MaxConfigMapBytes int
	// MaxSecretBytes bounds the keys and values of one Secret's data and
	// stringData together. Default 1 MiB, as in Kubernetes.
	MaxSecretBytes int
	// MaxGracePeriodSeconds bounds terminationGracePeriodSeconds, a pod's
	// and a probe's (see also ValidateGracePeriod). Default 3600.
	MaxGracePeriodSeconds int64
}

// DefaultLimits returns the default Limits.
func DefaultLimits() Limits {
	return Limits{
		MaxContainersPerPod:     DefaultMaxContainersPerPod,
		MaxEnvVarsPerContainer:  DefaultMaxEnvVarsPerContainer,
		MaxEnvBytesPerContainer: DefaultMaxEnvBytesPerContainer,
		MaxConfigMapBytes:       DefaultMaxConfigMapBytes,
		MaxSecretBytes:          DefaultMaxSecretBytes,
		MaxGracePeriodSeconds:   DefaultMaxGracePeriodSeconds,
	}
}

// ClientLimits are the Limits of a client that does not know the node's:
// the bounds each node sets for itself (containers per pod, the grace
// period: podsyncd's --max-containers-per-pod and
// --max-grace-period-seconds) are left to the node, which reports a
// violation with its own limit; the rest are the defaults.
func ClientLimits() Limits {
	l := DefaultLimits()
	l.MaxContainersPerPod = math.MaxInt32
	l.MaxGracePeriodSeconds = math.MaxInt64
	return l
}

func (l Limits) withDefaults() Limits {
	d := DefaultLimits()
	orDefault := func(v *int, def int) {
		if *v <= 0 {
			*v = def
		}
	}
	orDefault(&l.MaxContainersPerPod, d.MaxContainersPerPod)
	orDefault(&l.MaxEnvVarsPerContainer, d.MaxEnvVarsPerContainer)
	orDefault(&l.MaxEnvBytesPerContainer, d.MaxEnvBytesPerContainer)
	orDefault(&l.MaxConfigMapBytes, d.MaxConfigMapBytes)
	orDefault(&l.MaxSecretBytes, d.MaxSecretBytes)
	if l.MaxGracePeriodSeconds <= 0 {
		l.MaxGracePeriodSeconds = d.MaxGracePeriodSeconds
	}
	return l
}

// Options is what validation needs beyond the object: the node's limits
// and name, and the objects sent with a pod. The zero Options use
// DefaultLimits, accept any spec.nodeName that is a DNS-1123 subdomain and
// hold no ConfigMap or Secret.
type Options struct {
	// Limits bound object sizes. Zero fields take their defaults.
	Limits Limits
	// NodeName is the node's name. When set, a pod's spec.nodeName must be
	// empty or equal to it.
	NodeName string
	// Objects are the ConfigMaps and Secrets a pod's volumes and env may
	// refer to; a reference to one missing from it that is not optional
	// is a violation. Nil holds none.
	Objects *Objects
	// StoredObjects says that the node resolves a reference to a
	// ConfigMap or Secret missing from Objects to its stored objects (the
	// pod waits for one that is not stored yet, as on a kubelet): such a
	// reference is then not a violation. The keys of an object in
	// Objects are still checked.
	StoredObjects bool
}

// Objects index the ConfigMaps and Secrets sent with pods by namespace and
// name. A nil *Objects holds none. Objects are not changed once made, so
// they are safe for concurrent use.
type Objects struct {
	configMaps map[types.NamespacedName]*corev1.ConfigMap
	secrets    map[types.NamespacedName]*corev1.Secret
}

// NewObjects indexes configMaps and secrets, which should be defaulted
// (convert.DefaultConfigMap and convert.DefaultSecret): the keys a pod may
// refer to are a ConfigMap's data and binaryData and a Secret's data. Of
// two objects with the same namespace and name, the later is kept; nil
// entries are skipped. The objects are not copied.
func NewObjects(configMaps []*corev1.ConfigMap, secrets []*corev1.Secret) *Objects {
	o := &Objects{
		configMaps: make(map[types.NamespacedName]*corev1.ConfigMap, len(configMaps)),
		secrets:    make(map[types.NamespacedName]*corev1.Secret, len(secrets)),
	}
	for _, cm := range configMaps {
		if cm != nil {
			o.configMaps[types.NamespacedName{Namespace: cm.Namespace, Name: cm.Name}] = cm
		}
	}
	for _, s := range secrets {
		if s != nil {
			o.secrets[types.NamespacedName{Namespace: s.Namespace, Name: s.Name}] = s
		}
	}
	return o
}

func (o *Objects) configMap(namespace, name string) (*corev1.ConfigMap, bool) {
	if o == nil {
		return nil, false
	}
	cm, ok := o.configMaps[types.NamespacedName{Namespace: namespace, Name: name}]
	return cm, ok
}

func (o *Objects) secret(namespace, name string) (*corev1.Secret, bool) {
	if o == nil {
		return nil, false
	}
	s, ok := o.secrets[types.NamespacedName{Namespace: namespace, Name: name}]
	return s, ok
}
