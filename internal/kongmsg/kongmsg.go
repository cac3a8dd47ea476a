// Package kongmsg words kong's parse errors for the user.
//
// It rewords those where kong speaks of its scanner: a flag given last
// without its value.
package kongmsg

import (
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"time"

	"github.com/alecthomas/kong"
)

// noValue matches kong's error for a flag whose value is missing at the
// end of the command line.
var noValue = regexp.MustCompile(`^--([\w.-]+): expected [^"]* value but got "EOL" \(<EOL>\)$`)

// flagValue matches kong's error for a flag followed by another flag
// where its value should be.
var flagValue = regexp.MustCompile(`^--([\w.-]+): expected [^"]* value but got "(-[^"]*)" \((?:long|short) flag\); perhaps try `)

// kinds are the words for the placeholders lvskit's commands use.
var kinds = map[string]string{
	"ADDR":       "an address",
	"ADDR[/LEN]": "an address, or an address/length",
	"PREFIX":     "a prefix, ADDR/LEN",
	"IFACE":      "an interface name",
	"FILE":       "a file",
	"DIR":        "a directory",
	"PORT":       "a port number",
	"PROTO":      "a protocol",
	"TEXT":       "text",
	"COLUMN":     "a column name",
	"ASN":        "an AS number",
	"SECONDS":    "a number of seconds",
}

// Message is err's text for the user. A flag given last without a value
// reads "--vip needs a value (an address)" instead of kong's
// `--vip: expected string value but got "EOL" (<EOL>)`, and one followed
// by another flag reads "--vip needs a value (an address), not --dev;
// write --vip=--dev if --dev is its value";
// other errors are kong's. kctx is the context of kong's ParseError (nil: none); kind
// names what a flag takes where its placeholder does not say it well.
func Message(err error, kctx *kong.Context, kind map[string]string) string {
	msg := err.Error()
	tail := ""
	m := noValue.FindStringSubmatch(msg)
	if m == nil {
		if m = flagValue.FindStringSubmatch(msg); m == nil {
			return msg
		}
		tail = fmt.Sprintf(", not %s; write --%s=%s if %[1]s is its value", m[2], m[1], m[2])
	}
	name := m[1]
	what := kind[name]
	if what == "" && kctx != nil {
		for _, f := range kctx.Flags() {
			if f.Name == name {
				what = describe(f)
				break
			}
		}
	}
	if what != "" {
		what = " (" + what + ")"
	}
	return "--" + name + " needs a value" + what + tail
}

// describe says what kind of value flag f takes.
func describe(f *kong.Flag) string {
	t := f.Value.Target.Type()
	switch {
	case t == reflect.TypeOf(time.Duration(0)) && f.HasDefault && f.Default != "0":
		return "a duration such as " + f.Default
	case t == reflect.TypeOf(time.Duration(0)):
		return "a duration such as 30s"
	case f.Enum != "":
		return "one of " + strings.ReplaceAll(f.Enum, ",", ", ")
	case f.PlaceHolder != "":
		if k, ok := kinds[f.PlaceHolder]; ok {
			return k
		}
		return f.PlaceHolder
	case t.PkgPath() != "" && f.HasDefault && f.Default != "":
		return "such as " + f.Default // a type of the command's own
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a number"
	}
	return ""
}
