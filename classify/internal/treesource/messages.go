package treesource

import (
	"fmt"
	"reflect"
	"strings"

	pg_query "github.com/pganalyze/pg_query_go/v5"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
)

// message is one message type of pg_query's parse tree, with the Go names of its fields.
type message struct {
	desc   protoreflect.MessageDescriptor
	mt     protoreflect.MessageType
	goName string
	// fields are the Go fields by proto field name; oneofs the Go interface fields by oneof name.
	fields map[protoreflect.Name]string
	oneofs map[protoreflect.Name]string
}

// messages returns every message type of pg_query.proto, in declaration order.
func messages() ([]*message, error) {
	var out []*message
	descs := pg_query.File_pg_query_proto.Messages()
	for i := 0; i < descs.Len(); i++ {
		md := descs.Get(i)
		if md.Messages().Len() > 0 {
			return nil, fmt.Errorf("%s: nested message types are not handled", md.FullName())
		}
		mt, err := protoregistry.GlobalTypes.FindMessageByName(md.FullName())
		if err != nil {
			return nil, err
		}
		goType := reflect.TypeOf(mt.Zero().Interface()).Elem()
		m := &message{desc: md, mt: mt, goName: goType.Name(), fields: map[protoreflect.Name]string{}, oneofs: map[protoreflect.Name]string{}}
		for j := 0; j < goType.NumField(); j++ {
			sf := goType.Field(j)
			if oneof := sf.Tag.Get("protobuf_oneof"); oneof != "" {
				m.oneofs[protoreflect.Name(oneof)] = sf.Name
				continue
			}
			for _, part := range strings.Split(sf.Tag.Get("protobuf"), ",") {
				if name, ok := strings.CutPrefix(part, "name="); ok {
					m.fields[protoreflect.Name(name)] = sf.Name
				}
			}
		}
		for j := 0; j < md.Fields().Len(); j++ {
			field := md.Fields().Get(j)
			if field.IsMap() {
				return nil, fmt.Errorf("%s: map fields are not handled", field.FullName())
			}
			if oneof := field.ContainingOneof(); oneof != nil {
				if m.oneofs[oneof.Name()] == "" {
					return nil, fmt.Errorf("%s: no Go field", oneof.FullName())
				}
			} else if m.fields[field.Name()] == "" {
				return nil, fmt.Errorf("%s: no Go field", field.FullName())
			}
		}
		out = append(out, m)
	}
	return out, nil
}

// wrapper returns the Go type of the oneof wrapper of member, and the name of its one field, by
// setting the member on a new message.
func (m *message) wrapper(member protoreflect.FieldDescriptor) (typeName, field string, err error) {
	msg := m.mt.New()
	msg.Set(member, msg.NewField(member))
	goField := m.oneofs[member.ContainingOneof().Name()]
	wrapper := reflect.ValueOf(msg.Interface()).Elem().FieldByName(goField).Elem().Type()
	if wrapper.Kind() != reflect.Pointer || wrapper.Elem().NumField() != 1 {
		return "", "", fmt.Errorf("%s: unexpected oneof wrapper %s", member.FullName(), wrapper)
	}
	return wrapper.Elem().Name(), wrapper.Elem().Field(0).Name, nil
}

// goMessageName returns the Go type name of a message-kind field's message.
func goMessageName(field protoreflect.FieldDescriptor) (string, error) {
	mt, err := protoregistry.GlobalTypes.FindMessageByName(field.Message().FullName())
	if err != nil {
		return "", err
	}
	return reflect.TypeOf(mt.Zero().Interface()).Elem().Name(), nil
}

// goEnumName returns the Go type name of an enum-kind field's enum.
func goEnumName(field protoreflect.FieldDescriptor) (string, error) {
	et, err := protoregistry.GlobalTypes.FindEnumByName(field.Enum().FullName())
	if err != nil {
		return "", err
	}
	return reflect.TypeOf(et.New(0)).Name(), nil
}
