package vk

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/podsync/podsync/internal/vk/provider"
)

// listerObjects reads ConfigMaps and Secrets from the informers' caches.
type listerObjects struct {
	configMaps corelisters.ConfigMapLister
	secrets    corelisters.SecretLister
}

func (l listerObjects) ConfigMap(namespace, name string) (*corev1.ConfigMap, error) {
	return l.configMaps.ConfigMaps(namespace).Get(name)
}

func (l listerObjects) Secret(namespace, name string) (*corev1.Secret, error) {
	return l.secrets.Secrets(namespace).Get(name)
}

const (
	// pushTimeout bounds one push of a changed object to podsyncd.
	pushTimeout = 30 * time.Second
	// objectResync is the ConfigMap and Secret informers' resync period.
	objectResync = time.Minute
)

// pushChanges pushes every ConfigMap and Secret the API server adds or
// changes to the provider, which applies those its pods use on podsyncd
// (deletes are not pushed: podsyncd keeps the files, as a kubelet does).
// The informers' resync period (objectResync) bounds how long a failed
// push waits to be made again.
func pushChanges(ctx context.Context, p *provider.Provider, configMaps, secrets cache.SharedIndexInformer) error {
	handler := func(secret bool) cache.ResourceEventHandlerFuncs {
		push := func(obj any) {
			o, ok := obj.(metav1.Object)
			if !ok {
				return
			}
			ctx, cancel := context.WithTimeout(ctx, pushTimeout)
			defer cancel()
			p.ObjectChanged(ctx, secret, o.GetNamespace(), o.GetName())
		}
		return cache.ResourceEventHandlerFuncs{
			AddFunc: push,
			// Resyncs (every minute, the same object) are pushed too:
			// podsyncd does not write an unchanged object, and a push
			// that failed (podsyncd down) is made again.
			UpdateFunc: func(_, newObj any) { push(newObj) },
			DeleteFunc: func(obj any) {
				if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
					obj = t.Obj
				}
				o, ok := obj.(metav1.Object)
				if !ok {
					return
				}
				ctx, cancel := context.WithTimeout(ctx, pushTimeout)
				defer cancel()
				p.ObjectDeleted(ctx, secret, o.GetNamespace(), o.GetName())
			},
		}
	}
	if _, err := configMaps.AddEventHandler(handler(false)); err != nil {
		return fmt.Errorf("configmap informer: %w", err)
	}
	if _, err := secrets.AddEventHandler(handler(true)); err != nil {
		return fmt.Errorf("secret informer: %w", err)
	}
	return nil
}
