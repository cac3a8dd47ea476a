// Package man holds the manual pages of the lvskit commands (ipvsadm.8,
// ipvsadm-save.8, ipvsadm-restore.8, lvsctl.8, lvsprep.8), written in
// man(7) roff, and the tests that render them with groff and man-db and
// check their content. The pages are data; this package has no Go API.
package man
