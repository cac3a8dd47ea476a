// Package layering pins who may import whom in this module.
//
// It holds no code, only its test; docs/hacking.md, "Layout", draws the same
// layers. A package imports only packages of lower layers, so no arrow runs
// back up the tree; a new package must be given a layer before the test
// passes.
package layering
