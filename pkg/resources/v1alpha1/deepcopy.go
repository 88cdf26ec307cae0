package v1alpha1

import "encoding/json"

// DeepCopyInto copies in into out. The spec's fields are the file's
// configuration types (pkg/config), which have no generated deep copies:
// it goes through JSON, which carries every field a resource can set (the
// fields never marshalled are what config.Load resolves).
func (in *ApplicationSpec) DeepCopyInto(out *ApplicationSpec) {
	b, err := json.Marshal(in)
	if err != nil {
		panic("v1alpha1: copying an ApplicationSpec: " + err.Error())
	}
	*out = ApplicationSpec{}
	if err := json.Unmarshal(b, out); err != nil {
		panic("v1alpha1: copying an ApplicationSpec: " + err.Error())
	}
}

// DeepCopy returns a copy of in.
func (in *ApplicationSpec) DeepCopy() *ApplicationSpec {
	if in == nil {
		return nil
	}
	out := new(ApplicationSpec)
	in.DeepCopyInto(out)
	return out
}

// DeepCopyInto copies in into out, through JSON as ApplicationSpec's.
func (in *WavePolicySpec) DeepCopyInto(out *WavePolicySpec) {
	b, err := json.Marshal(in)
	if err != nil {
		panic("v1alpha1: copying a WavePolicySpec: " + err.Error())
	}
	*out = WavePolicySpec{}
	if err := json.Unmarshal(b, out); err != nil {
		panic("v1alpha1: copying a WavePolicySpec: " + err.Error())
	}
}

// DeepCopy returns a copy of in.
func (in *WavePolicySpec) DeepCopy() *WavePolicySpec {
	if in == nil {
		return nil
	}
	out := new(WavePolicySpec)
	in.DeepCopyInto(out)
	return out
}
