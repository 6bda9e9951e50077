// Command pause is the sandbox ("pause") process of the images that
// localcri builds: it holds a pod's namespaces open and does nothing else.
//
// It sleeps until SIGTERM or SIGINT and then exits 0, and, as PID 1 of the
// pod, it reaps every zombie that is reparented to it. It is built as a static
// binary (CGO_ENABLED=0) by localcri and placed at /pause in the image
// localcri.PauseImage.
package main
