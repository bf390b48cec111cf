package agentvfs_test

// The Go runner of the shared conformance suite (tests/conformance/README.md):
// every case against a real server, through the agentvfs package.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	agentvfs "github.com/agentvfs/agentvfs/clients/go"
	pb "github.com/agentvfs/agentvfs/clients/go/gen/agentvfs/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
)

type suite struct {
	Server struct {
		Config string `json:"config"`
	} `json:"server"`
	Token string `json:"token"`
	Cases []struct {
		Name  string `json:"name"`
		Steps []step `json:"steps"`
	} `json:"cases"`
}

type step struct {
	Call        string            `json:"call"`
	Request     any               `json:"request"`
	Expect      any               `json:"expect"`
	Error       any               `json:"error"`
	Save        map[string]string `json:"save"`
	Session     *string           `json:"session"`
	Token       *string           `json:"token"`
	Namespace   *string           `json:"namespace"`
	Label       *string           `json:"label"`
	Branch      *string           `json:"branch"`
	CancelAfter *int              `json:"cancel_after"`
}

// TestConformance runs every case of tests/conformance/*.json.
func TestConformance(t *testing.T) {
	files, err := filepath.Glob("../../tests/conformance/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no conformance files: %v", err)
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".json"), func(t *testing.T) {
			text, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			var s suite
			if err := json.Unmarshal(text, &s); err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			r := &runner{addr: startServer(t, s.Server.Config), token: s.Token, clients: map[[3]string]*agentvfs.Client{}}
			defer r.close()
			for _, c := range s.Cases {
				t.Run(c.Name, func(t *testing.T) {
					vars := map[string]any{}
					for i, st := range c.Steps {
						if err := r.step(c.Name, st, vars); err != nil {
							t.Fatalf("step %d (%s): %v", i, st.Call, err)
						}
					}
				})
			}
		})
	}
}

type runner struct {
	addr    string
	token   string
	clients map[[3]string]*agentvfs.Client
}

func (r *runner) close() {
	for _, c := range r.clients {
		_ = c.Close()
	}
}

// client returns the client of one (session, namespace, token); an empty
// namespace sends none.
func (r *runner) client(session, namespace, token string) (*agentvfs.Client, error) {
	key := [3]string{session, namespace, token}
	if c, ok := r.clients[key]; ok {
		return c, nil
	}
	c, err := agentvfs.NewClient(r.addr, agentvfs.Options{Session: session, Namespace: namespace, Token: token})
	if err != nil {
		return nil, err
	}
	r.clients[key] = c
	return c, nil
}

func (r *runner) step(caseName string, st step, vars map[string]any) error {
	session, token := caseName, r.token
	if st.Session != nil {
		session += "." + *st.Session
	}
	if st.Token != nil {
		token = *st.Token
	}
	namespace := ""
	if st.Namespace != nil {
		namespace = caseName + "." + *st.Namespace
	}
	c, err := r.client(session, namespace, token)
	if err != nil {
		return err
	}
	ctx := context.Background()
	if st.Label != nil {
		ctx = agentvfs.WithLabel(ctx, *st.Label)
	}
	if st.Branch != nil {
		ctx = agentvfs.WithBranch(ctx, *st.Branch)
	}
	result, callErr := call(ctx, c, st.Call, substitute(st.Request, vars), st.CancelAfter)
	var rpcErr *agentvfs.Error
	switch {
	case callErr != nil && !errors.As(callErr, &rpcErr):
		return callErr
	case rpcErr != nil && st.Error == nil:
		return fmt.Errorf("unexpected error %v", rpcErr)
	case rpcErr != nil:
		return check(substitute(st.Error, vars), errorJSON(rpcErr))
	case st.Error != nil:
		return fmt.Errorf("expected an error, got %v", result)
	}
	if st.Expect != nil {
		if err := check(substitute(st.Expect, vars), result); err != nil {
			return err
		}
	}
	for name, path := range st.Save {
		v, ok := lookup(result, path)
		if !ok {
			return fmt.Errorf("cannot save %s: not in %v", path, result)
		}
		vars[name] = v
	}
	return nil
}

// call makes one call by name with ctx (a step's label and branch); the result is proto
// JSON decoded into any.
func call(ctx context.Context, c *agentvfs.Client, name string, request any, cancelAfter *int) (any, error) {
	service, method, _ := strings.Cut(name, ".")
	desc, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName("agentvfs.v1." + service))
	if err != nil {
		return nil, fmt.Errorf("no service %s: %w", service, err)
	}
	md := desc.(protoreflect.ServiceDescriptor).Methods().ByName(protoreflect.Name(method))
	if md == nil {
		return nil, fmt.Errorf("no method %s", name)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	raw, err := json.Marshal(request)
	if err != nil {
		return nil, err
	}
	switch {
	case md.IsStreamingClient():
		return upload(ctx, c, request)
	case md.IsStreamingServer():
		return serverStream(ctx, cancel, c, name, raw, cancelAfter)
	}
	switch name {
	case "Filesystem.Commit":
		return commit(ctx, c, raw)
	case "Filesystem.Rewind":
		return rewind(ctx, c, raw)
	}
	req, err := newMessage(md.Input())
	if err != nil {
		return nil, err
	}
	if err := protojson.Unmarshal(raw, req); err != nil {
		return nil, fmt.Errorf("bad request: %w", err)
	}
	out, err := newMessage(md.Output())
	if err != nil {
		return nil, err
	}
	fullMethod := fmt.Sprintf("/%s/%s", md.Parent().FullName(), md.Name())
	if err := c.Conn().Invoke(ctx, fullMethod, req, out); err != nil {
		return nil, err
	}
	return toJSON(out)
}

// commit runs a Commit step through Client.Commit, each operation built by
// its constructor (WriteOp, ...) from the request's message; the result is
// {"files": [...]} as the response's proto JSON.
func commit(ctx context.Context, c *agentvfs.Client, raw []byte) (any, error) {
	req := &pb.CommitRequest{}
	if err := protojson.Unmarshal(raw, req); err != nil {
		return nil, fmt.Errorf("bad request: %w", err)
	}
	var ops []agentvfs.ChangesetOp
	for _, op := range req.GetOperations() {
		var opts []agentvfs.OpOption
		ifVersion := func(v *uint64) {
			if v != nil {
				opts = append(opts, agentvfs.IfVersion(*v))
			}
		}
		flag := func(set bool, opt agentvfs.OpOption) {
			if set {
				opts = append(opts, opt)
			}
		}
		switch o := op.GetOperation().(type) {
		case *pb.ChangesetOperation_Write:
			ifVersion(o.Write.IfVersion)
			flag(o.Write.GetCreateOnly(), agentvfs.CreateOnly())
			ops = append(ops, agentvfs.WriteOp(o.Write.GetPath(), o.Write.GetContent(), opts...))
		case *pb.ChangesetOperation_Edit:
			ifVersion(o.Edit.IfVersion)
			flag(o.Edit.GetReplaceAll(), agentvfs.ReplaceAll())
			ops = append(ops, agentvfs.EditOp(o.Edit.GetPath(), o.Edit.GetOldString(), o.Edit.GetNewString(), opts...))
		case *pb.ChangesetOperation_MultiEdit:
			ifVersion(o.MultiEdit.IfVersion)
			ops = append(ops, agentvfs.MultiEditOp(o.MultiEdit.GetPath(), o.MultiEdit.GetEdits(), opts...))
		case *pb.ChangesetOperation_Delete:
			if o.Delete.GetRecursive() {
				return nil, errors.New("the Go client's DeleteOp has no recursive")
			}
			ifVersion(o.Delete.IfVersion)
			ops = append(ops, agentvfs.DeleteOp(o.Delete.GetPath(), opts...))
		case *pb.ChangesetOperation_Move:
			ifVersion(o.Move.IfVersion)
			flag(o.Move.GetCreateOnly(), agentvfs.CreateOnly())
			ops = append(ops, agentvfs.MoveOp(o.Move.GetSource(), o.Move.GetDestination(), opts...))
		default:
			return nil, fmt.Errorf("an operation of no kind: %v", op)
		}
	}
	res, err := c.Commit(ctx, ops...)
	if err != nil {
		return nil, err
	}
	return toJSON(&pb.CommitResponse{Files: res.Files, Changeset: res.Changeset})
}

// rewind runs a Rewind step through Client.Rewind, its selector built by
// BySession ... SinceCursor and its flags by DryRun and Force; the result is
// the response's proto JSON.
func rewind(ctx context.Context, c *agentvfs.Client, raw []byte) (any, error) {
	req := &pb.RewindRequest{}
	if err := protojson.Unmarshal(raw, req); err != nil {
		return nil, fmt.Errorf("bad request: %w", err)
	}
	var sel agentvfs.RewindSelector
	switch s := req.GetSelector().(type) {
	case *pb.RewindRequest_Session:
		sel = agentvfs.BySession(s.Session)
	case *pb.RewindRequest_Handle:
		sel = agentvfs.ByHandle(s.Handle)
	case *pb.RewindRequest_Label:
		sel = agentvfs.ByLabel(s.Label)
	case *pb.RewindRequest_Changeset:
		sel = agentvfs.ByChangeset(s.Changeset)
	case *pb.RewindRequest_SinceCursor:
		sel = agentvfs.SinceCursor(s.SinceCursor)
	}
	var opts []agentvfs.RewindOption
	if req.GetDryRun() {
		opts = append(opts, agentvfs.DryRun())
	}
	if req.GetForce() {
		opts = append(opts, agentvfs.Force())
	}
	res, err := c.Rewind(ctx, req.GetPath(), sel, opts...)
	if err != nil {
		return nil, err
	}
	return toJSON(&pb.RewindResponse{Files: res.Files, Diff: res.Diff, Changeset: res.Changeset})
}

func newMessage(d protoreflect.MessageDescriptor) (proto.Message, error) {
	mt, err := protoregistry.GlobalTypes.FindMessageByName(d.FullName())
	if err != nil {
		return nil, err
	}
	return mt.New().Interface(), nil
}

func serverStream(ctx context.Context, cancel context.CancelFunc, c *agentvfs.Client, name string, raw []byte, cancelAfter *int) (any, error) {
	switch name {
	case "Filesystem.Grep":
		req := &pb.GrepRequest{}
		if err := protojson.Unmarshal(raw, req); err != nil {
			return nil, err
		}
		return collect(ctx, c.Grep(req), "matches", cancel, cancelAfter)
	case "Filesystem.Glob":
		req := &pb.GlobRequest{}
		if err := protojson.Unmarshal(raw, req); err != nil {
			return nil, err
		}
		return collect(ctx, c.Glob(req), "entries", cancel, cancelAfter)
	case "Filesystem.ReadBytes":
		req := &pb.ReadBytesRequest{}
		if err := protojson.Unmarshal(raw, req); err != nil {
			return nil, err
		}
		var buf bytes.Buffer
		var info *pb.FileInfo
		var err error
		if req.Version != nil {
			info, err = c.DownloadVersion(ctx, req.GetPath(), req.GetVersion(), &buf)
		} else {
			info, err = c.Download(ctx, req.GetPath(), &buf)
		}
		if err != nil {
			return nil, err
		}
		infoJSON, err := toJSON(info)
		if err != nil {
			return nil, err
		}
		sum := sha256.Sum256(buf.Bytes())
		return map[string]any{"info": infoJSON, "size": buf.Len(), "sha256": hex.EncodeToString(sum[:])}, nil
	case "Filesystem.Watch":
		req := &pb.WatchRequest{}
		if err := protojson.Unmarshal(raw, req); err != nil {
			return nil, err
		}
		return watch(ctx, c, req)
	}
	return nil, fmt.Errorf("no runner shape for the stream of %s", name)
}

// watch folds a Watch that stops at the head into {"events": [...],
// "cursor": ...}; a step that would follow forever is refused.
func watch(ctx context.Context, c *agentvfs.Client, req *pb.WatchRequest) (any, error) {
	if !req.GetStopAtHead() {
		return nil, errors.New("a Watch step must set stop_at_head")
	}
	w := c.Watch(req.GetPath(), agentvfs.WatchOptions{Cursor: req.GetCursor(), FromNow: req.GetFromNow(), StopAtHead: true})
	events := []any{}
	for e, err := range w.All(ctx) {
		if err != nil {
			return nil, err
		}
		j, err := toJSON(e)
		if err != nil {
			return nil, err
		}
		events = append(events, j)
	}
	return map[string]any{"events": events, "cursor": w.Cursor()}, nil
}

// collect folds a search into {list: [...], "summary": {...}}, cancelling
// once cancelAfter results arrived.
func collect[T proto.Message](ctx context.Context, s *agentvfs.Search[T], list string, cancel context.CancelFunc, cancelAfter *int) (any, error) {
	items := []any{}
	if cancelAfter != nil && *cancelAfter == 0 {
		cancel()
	}
	for item, err := range s.All(ctx) {
		if err != nil {
			return nil, err
		}
		j, err := toJSON(item)
		if err != nil {
			return nil, err
		}
		items = append(items, j)
		if cancelAfter != nil && len(items) >= *cancelAfter {
			cancel()
		}
	}
	summary, err := toJSON(s.Summary())
	if err != nil {
		return nil, err
	}
	return map[string]any{list: items, "summary": summary}, nil
}

func upload(ctx context.Context, c *agentvfs.Client, request any) (any, error) {
	fields, _ := request.(map[string]any)
	raw, err := json.Marshal(fields["header"])
	if err != nil {
		return nil, err
	}
	header := &pb.WriteBytesHeader{}
	if err := protojson.Unmarshal(raw, header); err != nil {
		return nil, err
	}
	data, err := pieces(fields["data"])
	if err != nil {
		return nil, err
	}
	resp, err := c.Upload(ctx, header, bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	return toJSON(resp)
}

// pieces concatenates [{"text"|"base64": ..., "repeat": n}].
func pieces(v any) ([]byte, error) {
	list, _ := v.([]any)
	var out []byte
	for _, p := range list {
		piece, _ := p.(map[string]any)
		var b []byte
		if text, ok := piece["text"].(string); ok {
			b = []byte(text)
		} else if b64, ok := piece["base64"].(string); ok {
			var err error
			if b, err = base64.StdEncoding.DecodeString(b64); err != nil {
				return nil, err
			}
		} else {
			return nil, fmt.Errorf("a piece has text or base64: %v", piece)
		}
		repeat := 1
		if n, ok := piece["repeat"].(float64); ok {
			repeat = int(n)
		}
		out = append(out, bytes.Repeat(b, repeat)...)
	}
	return out, nil
}

func toJSON(m proto.Message) (any, error) {
	raw, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(m)
	if err != nil {
		return nil, err
	}
	var out any
	return out, json.Unmarshal(raw, &out)
}

// errorJSON is an error as every runner reports it, with the Go error it
// wraps by its language-neutral name (tests/conformance/README.md).
func errorJSON(e *agentvfs.Error) any {
	metadata := map[string]any{}
	for k, v := range e.Metadata {
		metadata[k] = v
	}
	out := map[string]any{"grpc": grpcName(e.Status), "code": e.Code, "message": e.Message, "metadata": metadata}
	if i := e.OperationIndex(); i >= 0 {
		out["operation_index"] = i
	}
	var conflict *agentvfs.ConflictError
	switch {
	case errors.Is(e, fs.ErrNotExist):
		out["native"] = "not_found"
	case errors.Is(e, fs.ErrExist):
		out["native"] = "exists"
	case errors.Is(e, fs.ErrPermission):
		out["native"] = "permission"
	case errors.Is(e, syscall.EISDIR):
		out["native"] = "is_directory"
	case errors.Is(e, syscall.ENOTDIR):
		out["native"] = "not_directory"
	case errors.As(e, &conflict):
		out["native"] = "conflict"
		out["conflict"] = map[string]any{"path": conflict.Path, "expected_version": strconv.FormatUint(conflict.Expected, 10), "actual_version": strconv.FormatUint(conflict.Actual, 10)}
	}
	return out
}

// grpcName is the canonical name of a code ("NOT_FOUND", "CANCELLED").
func grpcName(c codes.Code) string {
	if c == codes.Canceled {
		return "CANCELLED"
	}
	var b strings.Builder
	for i, r := range c.String() {
		if i > 0 && r >= 'A' && r <= 'Z' {
			b.WriteByte('_')
		}
		b.WriteString(strings.ToUpper(string(r)))
	}
	return b.String()
}

// substitute replaces "${var}" strings by saved values, and ${var} inside a
// longer string by the value's text.
func substitute(v any, vars map[string]any) any {
	switch v := v.(type) {
	case string:
		if name, ok := strings.CutPrefix(v, "${"); ok {
			if saved, ok := vars[strings.TrimSuffix(name, "}")]; ok && strings.HasSuffix(name, "}") {
				return saved
			}
		}
		for name, saved := range vars {
			v = strings.ReplaceAll(v, "${"+name+"}", text(saved))
		}
		return v
	case []any:
		out := make([]any, len(v))
		for i, item := range v {
			out[i] = substitute(item, vars)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, item := range v {
			out[k] = substitute(item, vars)
		}
		return out
	}
	return v
}

// text is a saved value inside a string: a string as is, a number in decimal.
func text(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
	raw, _ := json.Marshal(v)
	return string(raw)
}

func lookup(v any, dotted string) (any, bool) {
	for _, key := range strings.Split(dotted, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		if v, ok = m[key]; !ok {
			return nil, false
		}
	}
	return v, true
}

// check matches actual against the expected pattern (README "Matching").
func check(expected, actual any) error {
	var problems []string
	checkAt("$", expected, actual, true, &problems)
	if len(problems) > 0 {
		raw, _ := json.Marshal(actual)
		return fmt.Errorf("%s in %s", strings.Join(problems, "; "), raw)
	}
	return nil
}

func checkAt(at string, expected, actual any, present bool, problems *[]string) {
	fail := func(format string, args ...any) { *problems = append(*problems, at+": "+fmt.Sprintf(format, args...)) }
	switch e := expected.(type) {
	case map[string]any:
		if arg, ok := e["$contains"]; ok {
			s, _ := actual.(string)
			if sub, _ := arg.(string); !strings.Contains(s, sub) {
				fail("%v does not contain %q", actual, sub)
			}
			return
		}
		if arg, ok := e["$gte"]; ok {
			a, aok := number(actual)
			b, bok := number(arg)
			if !aok || !bok || a < b {
				fail("%v is not >= %v", actual, arg)
			}
			return
		}
		if arg, ok := e["$json"]; ok {
			s, isString := actual.(string)
			var parsed any
			if err := json.Unmarshal([]byte(s), &parsed); !isString || err != nil {
				fail("%v is not a JSON string: %v", actual, err)
				return
			}
			checkAt(at+"<json>", arg, parsed, true, problems)
			return
		}
		got, ok := actual.(map[string]any)
		if present && !ok {
			fail("expected an object, got %v", actual)
			return
		}
		for k, v := range e {
			item, has := got[k]
			checkAt(at+"."+k, v, item, has, problems)
		}
	case []any:
		got, ok := actual.([]any)
		if present && !ok {
			fail("expected an array, got %v", actual)
			return
		}
		if len(got) != len(e) {
			fail("expected %d items, got %d", len(e), len(got))
			return
		}
		for i := range e {
			checkAt(fmt.Sprintf("%s[%d]", at, i), e[i], got[i], true, problems)
		}
	default:
		if !present {
			if !isDefault(expected) {
				fail("expected %v, got nothing", expected)
			}
			return
		}
		if isNumber(expected) || isNumber(actual) {
			a, aok := number(actual)
			b, bok := number(expected)
			if !aok || !bok || a != b {
				fail("expected %v, got %v", expected, actual)
			}
		} else if expected != actual {
			fail("expected %v, got %v", expected, actual)
		}
	}
}

// isDefault: the values proto JSON omits.
func isDefault(v any) bool {
	switch v := v.(type) {
	case nil:
		return true
	case bool:
		return !v
	case float64:
		return v == 0
	case string:
		return v == "" || v == "0" || strings.HasSuffix(v, "_UNSPECIFIED")
	}
	return false
}

func isNumber(v any) bool {
	switch v.(type) {
	case float64, int:
		return true
	}
	return false
}

func number(v any) (float64, bool) {
	switch v := v.(type) {
	case float64:
		return v, true
	case int:
		return float64(v), true
	case string:
		f, err := strconv.ParseFloat(v, 64)
		return f, err == nil
	}
	return 0, false
}
