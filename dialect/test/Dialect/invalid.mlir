// RUN: cute-opt %s -split-input-file -verify-diagnostics

// expected-error @+1 {{invalid layout "(4,8):(1,(2,3))": shape (4,8) and stride (1,(2,3)) are not congruent}}
func.func @incongruent(%l: !cute.layout<"(4,8):(1,(2,3))">) { return }

// -----

// expected-error @+1 {{invalid layout "(4,8:(1,4)": expected ',' or ')' at position 4}}
func.func @malformed(%l: !cute.layout<"(4,8:(1,4)">) { return }

// -----

// expected-error @+1 {{invalid layout "(4,0)": shape (4,0) has an extent that is not positive}}
func.func @empty(%l: !cute.layout<"(4,0)">) { return }

// -----

// expected-error @+1 {{alignment 2 is smaller than the element's 4 bytes}}
func.func @align(%p: !cute.ptr<f32, gmem, align 2>) { return }

// -----

// expected-error @+1 {{expected address space gmem, smem or rmem, got 'tmem'}}
func.func @space(%p: !cute.ptr<f32, tmem, align 4>) { return }

// -----

func.func @coords(%i: index) -> index {
  %l = cute.static_layout : !cute.layout<"(4,8):(8,1)">
  // expected-error @+1 {{takes 1 linear coordinate or 2 (one per leaf of the shape (4,8)), got 3}}
  %o = cute.crd2idx(%i, %i, %i), %l : !cute.layout<"(4,8):(8,1)">
  return %o : index
}
