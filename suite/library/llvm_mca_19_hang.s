v_accvgpr_read_b32 v43, a3
v_accvgpr_read_b32 v42, a2
v_accvgpr_read_b32 v41, a1
v_accvgpr_read_b32 v40, a0
v_accvgpr_read_b32 v45, a7
v_accvgpr_read_b32 v44, a6
v_accvgpr_read_b32 v39, a5
v_accvgpr_read_b32 v38, a4
s_waitcnt vmcnt(0)
ds_write_b128 v60, v[6:9] offset:4352
ds_write_b128 v60, v[2:5] offset:6400
ds_write_b128 v60, v[14:17] offset:8448
ds_write_b128 v60, v[10:13] offset:10496
s_waitcnt lgkmcnt(0)
s_barrier
ds_write_b16 v61, v22 offset:20736
ds_write_b16_d16_hi v62, v22 offset:20736
ds_write_b16 v64, v23 offset:256
ds_write_b16_d16_hi v65, v23 offset:20736
ds_write_b16 v105, v24 offset:512
ds_write_b16_d16_hi v66, v24 offset:20736
ds_write_b16 v106, v25 offset:20736
ds_write_b16_d16_hi v67, v25 offset:20736
ds_write_b16 v63, v18 offset:32
ds_write_b16_d16_hi v68, v18 offset:20736
ds_write_b16 v63, v19 offset:256
ds_write_b16_d16_hi v69, v19 offset:20736
ds_write_b16 v107, v20 offset:20736
ds_write_b16_d16_hi v70, v20 offset:20736
ds_write_b16 v105, v21 offset:768
ds_write_b16_d16_hi v71, v21 offset:20736
ds_write_b16 v63, v30 offset:64
ds_write_b16_d16_hi v72, v30 offset:20736
ds_write_b16 v108, v31 offset:20736
ds_write_b16_d16_hi v73, v31 offset:20736
ds_write_b16 v63, v32 offset:512
ds_write_b16_d16_hi v74, v32 offset:20736
ds_write_b16 v64, v33 offset:768
ds_write_b16_d16_hi v75, v33 offset:20736
ds_write_b16 v109, v26 offset:20736
ds_write_b16_d16_hi v76, v26 offset:20736
ds_write_b16 v105, v27 offset:256
ds_write_b16_d16_hi v77, v27 offset:20736
ds_write_b16 v64, v28 offset:512
ds_write_b16_d16_hi v78, v28 offset:20736
ds_write_b16 v63, v29 offset:768
ds_write_b16_d16_hi v79, v29 offset:20736
s_and_saveexec_b64 s[0:1], s[6:7]
ds_write_b32 v52, v46 offset:4096
s_or_b64 exec, exec, s[0:1]
s_waitcnt lgkmcnt(0)
s_barrier
ds_read_b32 v34, v50 offset:4096
v_mov_b32_e32 v2, 0
v_mov_b32_e32 v6, 0
v_mov_b32_e32 v7, 0
v_mov_b32_e32 v8, 0
s_waitcnt lgkmcnt(0)
v_cmp_lt_i32_e32 vcc, -1, v34
v_cmp_gt_i32_e64 s[0:1], s18, v34
s_and_b64 s[30:31], vcc, s[0:1]
v_mov_b32_e32 v9, 0
s_and_saveexec_b64 s[0:1], s[30:31]
v_lshlrev_b64 v[4:5], 10, v[34:35]
v_lshl_add_u64 v[4:5], v[4:5], 0, s[24:25]
v_or_b32_e32 v4, v4, v51
v_lshl_add_u64 v[4:5], v[4:5], 1, s[8:9]
global_load_dwordx4 v[6:9], v[4:5], off
s_or_b64 exec, exec, s[0:1]
ds_read_b32 v26, v50 offset:4160
v_mov_b32_e32 v3, 0
v_mov_b32_e32 v4, 0
v_mov_b32_e32 v5, 0
s_waitcnt lgkmcnt(0)
v_cmp_lt_i32_e32 vcc, -1, v26
v_cmp_gt_i32_e64 s[0:1], s18, v26
s_and_b64 s[34:35], vcc, s[0:1]
s_and_saveexec_b64 s[0:1], s[34:35]
v_mov_b32_e32 v27, v35
v_lshlrev_b64 v[2:3], 10, v[26:27]
v_lshl_add_u64 v[2:3], v[2:3], 0, s[24:25]
v_or_b32_e32 v2, v2, v51
v_lshl_add_u64 v[2:3], v[2:3], 1, s[8:9]
global_load_dwordx4 v[2:5], v[2:3], off
s_or_b64 exec, exec, s[0:1]
ds_read_b32 v28, v50 offset:4224
v_mov_b32_e32 v10, 0
v_mov_b32_e32 v14, 0
v_mov_b32_e32 v15, 0
v_mov_b32_e32 v16, 0
s_waitcnt lgkmcnt(0)
v_cmp_lt_i32_e32 vcc, -1, v28
v_cmp_gt_i32_e64 s[0:1], s18, v28
s_and_b64 s[36:37], vcc, s[0:1]
v_mov_b32_e32 v17, 0
s_and_saveexec_b64 s[0:1], s[36:37]
v_mov_b32_e32 v29, v35
v_lshlrev_b64 v[12:13], 10, v[28:29]
v_lshl_add_u64 v[12:13], v[12:13], 0, s[24:25]
v_or_b32_e32 v12, v12, v51
v_lshl_add_u64 v[12:13], v[12:13], 1, s[8:9]
global_load_dwordx4 v[14:17], v[12:13], off
s_or_b64 exec, exec, s[0:1]
ds_read_b32 v46, v50 offset:4288
v_mov_b32_e32 v11, 0
v_mov_b32_e32 v12, 0
v_mov_b32_e32 v13, 0
s_waitcnt lgkmcnt(0)
v_cmp_lt_i32_e32 vcc, -1, v46
v_cmp_gt_i32_e64 s[0:1], s18, v46
s_and_b64 s[0:1], vcc, s[0:1]
s_and_saveexec_b64 s[38:39], s[0:1]
v_mov_b32_e32 v47, v35
v_lshlrev_b64 v[10:11], 10, v[46:47]
v_lshl_add_u64 v[10:11], v[10:11], 0, s[24:25]
v_or_b32_e32 v10, v10, v51
v_lshl_add_u64 v[10:11], v[10:11], 1, s[8:9]
global_load_dwordx4 v[10:13], v[10:11], off
s_or_b64 exec, exec, s[38:39]
v_mov_b32_e32 v18, 0
v_mov_b32_e32 v22, 0
v_mov_b32_e32 v23, 0
v_mov_b32_e32 v24, 0
v_mov_b32_e32 v25, 0
s_and_saveexec_b64 s[38:39], s[30:31]
v_lshlrev_b64 v[20:21], 10, v[34:35]
v_lshl_add_u64 v[20:21], v[20:21], 0, s[24:25]
v_or_b32_e32 v20, v20, v51
v_lshl_add_u64 v[20:21], v[20:21], 1, s[22:23]
global_load_dwordx4 v[22:25], v[20:21], off
s_or_b64 exec, exec, s[38:39]
v_mov_b32_e32 v19, 0
v_mov_b32_e32 v20, 0
v_mov_b32_e32 v21, 0
s_and_saveexec_b64 s[30:31], s[34:35]
v_mov_b32_e32 v27, v35
v_lshlrev_b64 v[18:19], 10, v[26:27]
v_lshl_add_u64 v[18:19], v[18:19], 0, s[24:25]
v_or_b32_e32 v18, v18, v51
v_lshl_add_u64 v[18:19], v[18:19], 1, s[22:23]
global_load_dwordx4 v[18:21], v[18:19], off
s_or_b64 exec, exec, s[30:31]
v_mov_b32_e32 v26, 0
v_mov_b32_e32 v30, 0
v_mov_b32_e32 v31, 0
v_mov_b32_e32 v32, 0
v_mov_b32_e32 v33, 0
s_and_saveexec_b64 s[30:31], s[36:37]
v_mov_b32_e32 v29, v35
v_lshlrev_b64 v[28:29], 10, v[28:29]
v_lshl_add_u64 v[28:29], v[28:29], 0, s[24:25]
v_or_b32_e32 v28, v28, v51
v_lshl_add_u64 v[28:29], v[28:29], 1, s[22:23]
global_load_dwordx4 v[30:33], v[28:29], off
s_or_b64 exec, exec, s[30:31]
v_mov_b32_e32 v27, 0
v_mov_b32_e32 v28, 0
v_mov_b32_e32 v29, 0
s_and_saveexec_b64 s[30:31], s[0:1]
v_mov_b32_e32 v47, v35
v_lshlrev_b64 v[26:27], 10, v[46:47]
v_lshl_add_u64 v[26:27], v[26:27], 0, s[24:25]
v_or_b32_e32 v26, v26, v51
v_lshl_add_u64 v[26:27], v[26:27], 1, s[22:23]
global_load_dwordx4 v[26:29], v[26:27], off
s_or_b64 exec, exec, s[30:31]
s_cmp_gt_i32 s17, -3
v_mov_b32_e32 v46, -1
v_add_u32_e32 v34, s33, v104
v_cmp_gt_i32_e32 vcc, s5, v34
v_mov_b32_e32 v46, -1
s_and_saveexec_b64 s[0:1], vcc
v_cmp_gt_i32_e32 vcc, s16, v34
s_and_b64 s[34:35], vcc, s[26:27]
v_mov_b32_e32 v46, 0
s_and_saveexec_b64 s[30:31], s[34:35]
global_load_dword v46, v[36:37], off
s_or_b64 exec, exec, s[30:31]
s_or_b64 exec, exec, s[0:1]
ds_read_b64 v[124:125], v81 offset:4352
ds_read_b64 v[128:129], v83 offset:4352
ds_read_b64 v[130:131], v85 offset:4352
s_cmp_lt_i32 s17, 0
v_add_u32_e32 v34, s33, v53
s_cselect_b64 s[0:1], -1, 0
v_cmp_gt_i32_e32 vcc, s5, v34
v_add_u32_e32 v47, 1, v34
s_and_b64 s[30:31], s[0:1], vcc
v_cmp_gt_i32_e32 vcc, s5, v47
v_add_u32_e32 v47, 2, v34
v_cndmask_b32_e64 v116, v111, 0, s[30:31]
s_and_b64 s[30:31], s[0:1], vcc
v_cmp_gt_i32_e32 vcc, s5, v47
v_add_u32_e32 v34, 3, v34
ds_read2st64_b64 v[120:123], v80 offset1:4
v_cndmask_b32_e64 v117, v111, 0, s[30:31]
s_and_b64 s[30:31], s[0:1], vcc
v_cmp_gt_i32_e32 vcc, s5, v34
s_and_b64 s[0:1], s[0:1], vcc
v_cndmask_b32_e64 v118, v111, 0, s[30:31]
v_cndmask_b32_e64 v119, v111, 0, s[0:1]
v_accvgpr_write_b32 a0, v116
v_accvgpr_write_b32 a1, v117
v_accvgpr_write_b32 a2, v118
v_accvgpr_write_b32 a3, v119
s_add_i32 s17, s17, 1
s_add_i32 s33, s33, 64
s_waitcnt lgkmcnt(0)
v_mfma_f32_16x16x16_f16 a[0:3], v[124:125], v[120:121], a[0:3]
ds_read2st64_b64 v[116:119], v82 offset1:4
ds_read2st64_b64 v[124:127], v84 offset1:4
v_lshl_add_u64 v[36:37], v[36:37], 0, s[28:29]
s_waitcnt lgkmcnt(1)
v_mfma_f32_16x16x16_f16 a[0:3], v[128:129], v[116:117], a[0:3]
ds_read_b64 v[116:117], v87 offset:4352
s_waitcnt lgkmcnt(1)
v_mfma_f32_16x16x16_f16 a[0:3], v[130:131], v[124:125], a[0:3]
ds_read2st64_b64 v[128:131], v86 offset1:4
s_waitcnt lgkmcnt(0)
v_mfma_f32_16x16x16_f16 a[0:3], v[116:117], v[128:129], a[0:3]
ds_read_b64 v[116:117], v88 offset:8192
s_waitcnt lgkmcnt(0)
v_mfma_f32_16x16x16_f16 a[0:3], v[116:117], v[122:123], a[0:3]
ds_read_b64 v[116:117], v89 offset:8192
s_waitcnt lgkmcnt(0)
v_mfma_f32_16x16x16_f16 a[0:3], v[116:117], v[118:119], a[0:3]
ds_read_b64 v[116:117], v90 offset:8192
s_waitcnt lgkmcnt(0)
v_mfma_f32_16x16x16_f16 a[0:3], v[116:117], v[126:127], a[0:3]
ds_read_b64 v[116:117], v91 offset:8192
s_waitcnt lgkmcnt(0)
s_barrier
v_mfma_f32_16x16x16_f16 a[0:3], v[116:117], v[130:131], a[0:3]
s_barrier
s_nop 5
v_accvgpr_read_b32 v34, a0
v_accvgpr_read_b32 v117, a1
v_accvgpr_read_b32 v118, a2
v_max3_f32 v47, v34, s40, v117
v_accvgpr_read_b32 v119, a3
v_max3_f32 v47, v47, v118, v119
ds_write_b32 v54, v47 offset:40192
s_waitcnt lgkmcnt(0)
s_barrier
ds_read_b32 v116, v55 offset:40192
s_waitcnt lgkmcnt(0)
s_barrier
v_max_f32_e32 v116, v116, v116
v_max_f32_e32 v47, v47, v116
ds_write_b32 v54, v47 offset:40192
s_waitcnt lgkmcnt(0)
s_barrier
ds_read_b32 v116, v56 offset:40192
s_waitcnt lgkmcnt(0)
s_barrier
v_max_f32_e32 v116, v116, v116
v_max_f32_e32 v47, v47, v116
ds_bpermute_b32 v116, v57, v47
s_waitcnt lgkmcnt(0)
v_max_f32_e32 v116, v116, v116
v_max_f32_e32 v47, v47, v116
ds_bpermute_b32 v116, v58, v47
s_waitcnt lgkmcnt(0)
v_max3_f32 v116, v115, v47, v116
v_mul_f32_e32 v47, 0x3e0293ec, v116
v_fma_f32 v34, v34, s41, -v47
v_fma_f32 v117, v117, s41, -v47
v_cmp_gt_f32_e32 vcc, s42, v34
v_cmp_gt_f32_e64 s[0:1], s42, v117
v_fma_f32 v118, v118, s41, -v47
v_cndmask_b32_e32 v120, 0, v112, vcc
v_add_f32_e32 v34, v34, v120
v_cndmask_b32_e64 v120, 0, v112, s[0:1]
v_add_f32_e32 v117, v117, v120
v_cndmask_b32_e32 v120, 1.0, v113, vcc
v_cmp_gt_f32_e32 vcc, s42, v118
v_fma_f32 v119, v119, s41, -v47
v_exp_f32_e32 v117, v117
v_cndmask_b32_e32 v123, 0, v112, vcc
v_add_f32_e32 v118, v118, v123
v_cndmask_b32_e32 v124, 1.0, v113, vcc
v_cmp_gt_f32_e32 vcc, s42, v119
v_exp_f32_e32 v34, v34
v_exp_f32_e32 v123, v118
v_cndmask_b32_e32 v118, 0, v112, vcc
v_add_f32_e32 v118, v119, v118
v_cndmask_b32_e64 v121, 1.0, v113, s[0:1]
v_exp_f32_e32 v125, v118
v_mul_f32_e32 v122, v117, v121
v_fmac_f32_e32 v122, v34, v120
v_cndmask_b32_e32 v126, 1.0, v113, vcc
v_fmac_f32_e32 v122, v123, v124
v_fmac_f32_e32 v122, v125, v126
v_fma_f32 v115, v115, s41, -v47
ds_write_b32 v54, v122 offset:39168
s_waitcnt lgkmcnt(0)
s_barrier
ds_read_b32 v118, v55 offset:39168
v_cmp_gt_f32_e32 vcc, s42, v115
s_waitcnt lgkmcnt(0)
s_barrier
v_cndmask_b32_e32 v119, 0, v112, vcc
v_add_f32_e32 v115, v115, v119
v_exp_f32_e32 v115, v115
v_add_f32_e32 v127, v122, v118
v_fma_mixlo_f16 v118, v34, v120, 0
v_fma_mixlo_f16 v119, v123, v124, 0
v_fma_mixhi_f16 v119, v125, v126, 0
v_fma_mixhi_f16 v118, v117, v121, 0
ds_write_b32 v54, v127 offset:39168
s_waitcnt lgkmcnt(0)
s_barrier
ds_read_b32 v128, v56 offset:39168
s_waitcnt lgkmcnt(0)
s_barrier
ds_write_b64 v59, v[118:119] offset:37120
s_waitcnt lgkmcnt(0)
s_barrier
ds_read_b64 v[118:119], v92 offset:37120
ds_read_b64 v[120:121], v93 offset:20736
v_cndmask_b32_e32 v34, 1.0, v113, vcc
v_mul_f32_e32 v122, v115, v34
ds_read_b64 v[124:125], v94 offset:2048
v_pk_mul_f32 v[40:41], v[122:123], v[40:41] op_sel_hi:[0,1]
v_pk_mul_f32 v[42:43], v[122:123], v[42:43] op_sel_hi:[0,1]
v_accvgpr_write_b32 a0, v40
v_accvgpr_write_b32 a1, v41
v_accvgpr_write_b32 a2, v42
v_accvgpr_write_b32 a3, v43
ds_read_b64 v[40:41], v95 offset:37120
v_pk_mul_f32 v[42:43], v[122:123], v[38:39] op_sel_hi:[0,1]
s_waitcnt lgkmcnt(2)
v_mfma_f32_16x16x16_f16 a[0:3], v[120:121], v[118:119], a[0:3]
ds_read_b64 v[120:121], v96 offset:20736
ds_read_b64 v[38:39], v97 offset:2048
v_pk_mul_f32 v[44:45], v[122:123], v[44:45] op_sel_hi:[0,1]
v_accvgpr_write_b32 a4, v42
v_accvgpr_write_b32 a5, v43
v_accvgpr_write_b32 a6, v44
v_accvgpr_write_b32 a7, v45
ds_read_b64 v[42:43], v99 offset:20736
s_waitcnt lgkmcnt(2)
v_mfma_f32_16x16x16_f16 a[0:3], v[120:121], v[40:41], a[0:3]
v_add_f32_e32 v34, v127, v128
ds_bpermute_b32 v44, v57, v34
v_add_co_u32_e32 v110, vcc, 1, v110
v_mfma_f32_16x16x16_f16 a[4:7], v[124:125], v[118:119], a[4:7]
s_and_b64 vcc, exec, vcc
s_waitcnt lgkmcnt(0)
v_add_f32_e32 v34, v34, v44
v_mfma_f32_16x16x16_f16 a[4:7], v[38:39], v[40:41], a[4:7]
ds_read_b64 v[38:39], v98 offset:37120
s_waitcnt lgkmcnt(0)
v_mfma_f32_16x16x16_f16 a[0:3], v[42:43], v[38:39], a[0:3]
ds_read_b64 v[40:41], v100 offset:2048
ds_read_b64 v[42:43], v102 offset:20736
s_waitcnt lgkmcnt(1)
v_mfma_f32_16x16x16_f16 a[4:7], v[40:41], v[38:39], a[4:7]
ds_read_b64 v[38:39], v101 offset:37120
ds_read_b64 v[40:41], v103 offset:2048
s_waitcnt lgkmcnt(1)
v_mfma_f32_16x16x16_f16 a[0:3], v[42:43], v[38:39], a[0:3]
ds_bpermute_b32 v42, v58, v34
s_waitcnt lgkmcnt(0)
v_add_f32_e32 v34, v34, v42
v_mfma_f32_16x16x16_f16 a[4:7], v[40:41], v[38:39], a[4:7]
v_fmac_f32_e32 v34, v114, v122
v_mov_b32_e32 v114, v34
v_mov_b32_e32 v115, v116
