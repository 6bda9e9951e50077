// Package plantest builds the pods and runtime views that the tests of the
// planner, the status and the CRI configs start from: one base pod (two
// containers, restartPolicy Always), its view with both containers
// running in a ready sandbox, instances and sandboxes of a given age
// relative to T0, and pod mutators. Test code only.
package plantest
