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

func.func @coords(%i: index) -> index {
  %l = cute.static_layout : !cute.layout<"(4,8):(8,1)">
  // expected-error @+1 {{coordinate (?,?,?) does not fit the shape (4,8)}}
  %o = cute.crd2idx %l[%i, %i, %i] {coord = "(?,?,?)"} : !cute.layout<"(4,8):(8,1)">, (index, index, index) -> index
  return %o : index
}

// -----

func.func @coord_values(%i: index) -> index {
  %l = cute.static_layout : !cute.layout<"(4,8):(8,1)">
  // expected-error @+1 {{coordinate (?,?) has 2 run-time entries ('?'), but 1 values were given}}
  %o = cute.crd2idx %l[%i] {coord = "(?,?)"} : !cute.layout<"(4,8):(8,1)">, (index) -> index
  return %o : index
}

// -----

func.func @leaf(%i: index) -> index {
  %l = cute.static_layout : !cute.layout<"(4,8):(8,1)">
  // expected-error @+1 {{leaf 4 of a layout with 4 leaves (shape then stride)}}
  %o = cute.get_leaf %l {index = 4} : !cute.layout<"(4,8):(8,1)"> -> index
  return %o : index
}

// -----

func.func @dynamic_strided_tile(%m: i32) {
  %l = cute.make_layout(%m) : (i32) -> !cute.layout<"?:1">
  %t = cute.static_layout : !cute.layout<"(4):(2)">
  // expected-error @+1 {{'cute.zipped_divide': mode 0 of ?:1 has run-time leaves; it can only be divided by a contiguous tile n:1, got 4:2}}
  %z = cute.zipped_divide %l, %t {by_mode} : !cute.layout<"?:1">, !cute.layout<"(4):(2)">
  return
}

// -----

func.func @incompatible() {
  %a = cute.static_layout : !cute.layout<"(2,60):(4,16)">
  %b = cute.static_layout : !cute.layout<"5:1">
  // expected-error @+1 {{'cute.logical_divide': composition (2,60):(4,16) o 5:1: extent 5 is not divisible by 2}}
  %c = cute.logical_divide %a, %b : !cute.layout<"(2,60):(4,16)">, !cute.layout<"5:1">
  return
}

// -----

func.func @leaves(%m: index) {
  // expected-error @+1 {{the layout (?,8):(?,1) has 2 run-time leaves ('?'), but 1 values were given}}
  %l = cute.make_layout(%m) : (index) -> !cute.layout<"(?,8):(?,1)">
  return
}

// -----

func.func @vector_size(%g: !llvm.ptr<1>, %i: i32) {
  // expected-error @+1 {{moves 8 elements (the size of (4,2):(1,8)) but the vector type is 'vector<4xf32>'}}
  %v = cute.load %g[%i] {layout = "(4,2):(1,8)", align = 16, divisibility = 1} : !llvm.ptr<1>, i32 -> vector<4xf32>
  return
}
