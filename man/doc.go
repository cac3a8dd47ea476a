// Package man holds the manual pages of the lvskit commands.
//
// They are ipvsadm.8, ipvsadm-save.8, ipvsadm-restore.8, lvsctl.8 and
// lvsprep.8, written in man(7) roff; the tests render them with groff and
// man-db and check their content. The pages are data; this package has no Go
// API.
package man
