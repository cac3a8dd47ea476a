package ipvs_test

import (
	"encoding/binary"
	"net/netip"

	"golang.org/x/sys/unix"

	"github.com/lvskit/lvskit/ipvs"
)

// Getsockopt answers the kernel's legacy requests from the fake's table
// as ip_vs_ctl.c's do_ip_vs_get_ctl does, written from the kernel's
// structures (include/uapi/linux/ip_vs.h) apart from the client's
// decoder: a service entry carries the count of every destination; the
// destination entries leave out those of the other family and stop at
// the room the caller gave.
func (k *fakeKernel) Getsockopt(opt int, b []byte) error {
	if k.legacyCalls == nil {
		k.legacyCalls = map[int]int{}
	}
	k.legacyCalls[opt]++
	if k.legacyErr != 0 {
		return k.legacyErr
	}
	switch opt {
	case ipvs.SoGetInfo:
		// The kernel counts IPv4 services alone for this interface.
		svcs, _ := k.fake.Services()
		n := 0
		for _, s := range svcs {
			if s.Family == ipvs.AFInet {
				n++
			}
		}
		ne.PutUint32(b[8:], uint32(n))
		return nil
	case ipvs.SoGetServices:
		return k.legacyServices(b)
	}
	key := ipvs.Service{Family: ipvs.AFInet, FWMark: ne.Uint32(b[12:])}
	if key.FWMark == 0 {
		key.Protocol = ipvs.Protocol(ne.Uint16(b[0:]))
		key.Addr = netip.AddrFrom4([4]byte(b[4:8]))
		key.Port = binary.BigEndian.Uint16(b[8:])
	}
	if _, err := k.fake.Service(key); err != nil {
		return unix.ESRCH
	}
	if opt == ipvs.SoGetDests {
		k.destsAsked = append(k.destsAsked, key)
		if k.beforeLegacyDests != nil {
			k.beforeLegacyDests()
		}
	}
	dests, err := k.fake.Destinations(key)
	if err != nil {
		return errnoOf(err)
	}
	switch opt {
	case ipvs.SoGetService:
		if len(b) < 104 {
			return unix.EINVAL
		}
		ne.PutUint32(b[44:], uint32(len(dests)))
	case ipvs.SoGetDests:
		if k.afterLegacyDests != nil {
			defer k.afterLegacyDests()
		}
		room := int(ne.Uint32(b[16:]))
		if len(b) != 24+room*96 {
			return unix.EINVAL
		}
		n := 0
		for _, d := range dests {
			if n == room {
				break
			}
			if d.Family != ipvs.AFInet {
				continue
			}
			e := b[24+n*96:][:96]
			a := d.Addr.As4()
			copy(e[0:4], a[:])
			binary.BigEndian.PutUint16(e[4:], d.Port)
			ne.PutUint32(e[8:], uint32(d.FwdMethod)|0x0100) // IP_VS_CONN_F_INACTIVE and friends ride along
			ne.PutUint32(e[12:], d.Weight)
			ne.PutUint32(e[16:], d.UThreshold)
			ne.PutUint32(e[20:], d.LThreshold)
			ne.PutUint32(e[24:], d.ActiveConns)
			ne.PutUint32(e[28:], d.InactConns)
			ne.PutUint32(e[32:], d.PersistConns)
			n++
		}
	default:
		return unix.EINVAL
	}
	return nil
}

// legacyServices answers IP_VS_SO_GET_SERVICES: the IPv4 services in dump
// order, as many as the room the caller gave.
func (k *fakeKernel) legacyServices(b []byte) error {
	room := int(ne.Uint32(b))
	if len(b) != 8+room*104 {
		return unix.EINVAL
	}
	if k.beforeLegacyServices != nil {
		k.beforeLegacyServices()
	}
	svcs, err := k.fake.Services()
	if err != nil {
		return errnoOf(err)
	}
	n := 0
	for _, s := range svcs {
		if n == room {
			break
		}
		if s.Family != ipvs.AFInet {
			continue
		}
		e := b[8+n*104:][:104]
		clear(e)
		ne.PutUint16(e[0:], uint16(s.Protocol))
		if s.Addr.Is4() {
			a := s.Addr.As4()
			copy(e[4:8], a[:])
		}
		binary.BigEndian.PutUint16(e[8:], s.Port)
		ne.PutUint32(e[12:], s.FWMark)
		copy(e[16:32], s.Scheduler)
		ne.PutUint32(e[32:], uint32(s.Flags))
		dests, _ := k.fake.Destinations(s.Service)
		ne.PutUint32(e[44:], uint32(len(dests))) // of both families
		n++
	}
	return nil
}
